--- What an inline suggestion (lua/agi/suggest.lua) is asked from: whether a buffer gets
--- suggestions, the text around the cursor (bounded), and the recent suggestions remembered, so
--- that typing into one shows the rest of it without asking again.

local M, H = {}, {}

H.max_context = 32 * 1024 -- bytes of prefix, and of suffix
H.cache_size = 8
H.cache = {} -- recent suggestions: { prefix, suffix, text }, newest last

--- Cheap enough for every keystroke: the buffer's kind and filetype. {config}: suggest's.
---@return boolean, string|nil Whether it may, and why not
M.allowed = function(buf, config)
  if vim.g.agi_disable == true or vim.b[buf].agi_disable == true then return false, 'disabled in this buffer (b:agi_disable)' end
  local buftype = vim.bo[buf].buftype
  if buftype ~= '' and buftype ~= 'acwrite' then return false, 'no suggestions in a ' .. buftype .. ' buffer' end
  if not vim.bo[buf].modifiable then return false, 'the buffer is not modifiable' end
  local filetype = vim.bo[buf].filetype
  local on = config.filetypes[filetype]
  if on == nil then on = config.filetypes['*'] end
  if on == false then return false, 'suggestions are off for filetype ' .. (filetype == '' and '(none)' or filetype) end
  return true
end

--- M.allowed, and the buffer is not too large.
M.eligible = function(buf, config)
  local ok, why = M.allowed(buf, config)
  if not ok then return false, why end
  local size = vim.api.nvim_buf_get_offset(buf, vim.api.nvim_buf_line_count(buf))
  if size > config.max_filesize then return false, 'the buffer is larger than suggest.max_filesize' end
  return true
end

--- The text before and after (row, col) of {buf} (0-based), {lines} lines each way and at most
--- 32 KiB; {below}: for a new line below row.
---@return string, string The prefix and the suffix
M.text = function(buf, row, col, below, lines)
  local count = vim.api.nvim_buf_line_count(buf)
  local line = vim.api.nvim_buf_get_lines(buf, row, row + 1, true)[1]
  local before = vim.api.nvim_buf_get_lines(buf, math.max(0, row - lines), row, true)
  local after = vim.api.nvim_buf_get_lines(buf, row + 1, math.min(count, row + 1 + lines), true)
  table.insert(before, line:sub(1, col))
  if not below then table.insert(after, 1, line:sub(col + 1)) end
  local prefix = table.concat(H.nearest(before, true), '\n') .. (below and '\n' or '')
  return prefix, table.concat(H.nearest(after, false), '\n')
end

--- Keep suggestion {text} for the text around it.
M.remember = function(prefix, suffix, text)
  table.insert(H.cache, { prefix, suffix, text })
  if #H.cache > H.cache_size then table.remove(H.cache, 1) end
end

--- What is left of a recent suggestion when the text before the cursor has grown into it.
M.recall = function(prefix, suffix)
  for i = #H.cache, 1, -1 do
    local p, s, text = unpack(H.cache[i])
    if s == suffix and #prefix >= #p and prefix:sub(1, #p) == p then
      local typed = prefix:sub(#p + 1)
      if #typed < #text and text:sub(1, #typed) == typed then return text:sub(#typed + 1) end
    end
  end
  return nil
end

--- The lines nearest the cursor (the end of {lines} when {at_end}) within H.max_context bytes.
H.nearest = function(lines, at_end)
  local size = 0
  for _, l in ipairs(lines) do
    size = size + #l + 1
  end
  while size > H.max_context and #lines > 1 do
    size = size - #table.remove(lines, at_end and 1 or #lines) - 1
  end
  return lines
end

return M
