--- The range :AgiImplement takes without one: the comment block at (or above) the cursor and
--- the signature and stub body right below it. Used by lua/agi/init.lua.

local R, H = {}, {}

--- The comment leaders of buffer {buf}'s filetype, from 'commentstring' and 'comments' (leaving
--- out the "f" entries, which are list bullets like "-").
---@param buf integer
---@return string[]
R.comment_leaders = function(buf)
  local leaders, seen = {}, {}
  local add = function(leader)
    leader = vim.trim(leader)
    if leader ~= '' and not seen[leader] then
      seen[leader] = true
      table.insert(leaders, leader)
    end
  end
  add((vim.bo[buf].commentstring or ''):match('^(.-)%%s') or '')
  for _, part in ipairs(vim.split(vim.bo[buf].comments or '', ',', { plain = true })) do
    local flags, leader = part:match('^([^:]*):(.*)$')
    if flags ~= nil and not flags:find('f') then add(leader) end
  end
  return #leaders > 0 and leaders or { '#', '//', '--', ';' }
end

--- `{first, last}` (1-based) of the comment block at or above row {row} of {buf} with the
--- signature and stub below it, or of the signature and stub at {row}.
---@param buf integer
---@param row integer
---@return table
R.implement = function(buf, row)
  local count = vim.api.nvim_buf_line_count(buf)
  local lo, hi = math.max(1, row - 200), math.min(count, row + 200)
  local text = vim.api.nvim_buf_get_lines(buf, lo - 1, hi, true)
  local line = function(r) return text[r - lo + 1] or '' end
  local leaders = R.comment_leaders(buf)
  local is_comment = function(r)
    local s = vim.trim(line(r))
    for _, leader in ipairs(leaders) do
      if s ~= '' and vim.startswith(s, leader) then return true end
    end
    return false
  end
  local first, last = row, row
  while first > lo and is_comment(first - 1) do
    first = first - 1
  end
  if is_comment(row) then
    while last < hi and is_comment(last + 1) do
      last = last + 1
    end
    if last < hi and vim.trim(line(last + 1)) ~= '' then last = H.stub_end(line, last + 1, hi) end
  elseif vim.trim(line(row)) ~= '' then
    last = H.stub_end(line, row, hi)
  end
  return { first, last }
end

--- The last line of the signature at {sig} and its (stub) body: deeper-indented lines, and a
--- closing bracket or `end` at the signature's indentation.
H.stub_end = function(line, sig, hi)
  local indent = function(r) return #line(r):match('^%s*') end
  local blank = function(r) return vim.trim(line(r)) == '' end
  local base, last = indent(sig), sig
  if last < hi and indent(last + 1) == base and line(last + 1):match('^%s*{') then last = last + 1 end
  while last < hi and (blank(last + 1) or indent(last + 1) > base) do
    last = last + 1
  end
  while last > sig and blank(last) do
    last = last - 1
  end
  if last < hi and indent(last + 1) == base then
    local s = vim.trim(line(last + 1))
    if s:match('^[%]})]') or s:match('^end%f[%W]') then last = last + 1 end
  end
  return last
end

return R
