--- What a request shows below its range: the proposal as it streams in (dimmed virtual lines,
--- with the tool steps), and with `apply = "preview"` the finished change.
--- Used by lua/agi/request.lua and lua/agi/review.lua.

local P, H = {}, {}

P.ns = vim.api.nvim_create_namespace('agi-preview')

--- Take {ops} (from the Python host: `{'text', s}`, `{'tool', key, line}`, `{'step'}` for a new
--- model call) into {req}'s streamed proposal, and show it below row {row} (0-based).
---@param req table
---@param ops table
---@param row integer
P.stream = function(req, ops, row)
  local s = req.streamed
  if s == nil then
    s = { lines = { '' }, cache = {}, tools = {}, order = {} }
    req.streamed = s
  end
  for _, op in ipairs(ops) do
    if op[1] == 'text' then
      local parts = vim.split(op[2], '\n', { plain = true })
      s.lines[#s.lines] = s.lines[#s.lines] .. parts[1]
      for i = 2, #parts do
        table.insert(s.lines, parts[i])
      end
    elseif op[1] == 'step' then
      s.lines, s.cache = { '' }, {}
    elseif op[1] == 'tool' then
      if s.tools[op[2]] == nil then table.insert(s.order, op[2]) end
      s.tools[op[2]] = op[3]
    end
  end
  H.render(req, s, row)
end

--- Remove {req}'s streamed proposal.
---@param req table
P.clear_stream = function(req)
  local s = req.streamed
  req.streamed = nil
  if s ~= nil and s.mark ~= nil and vim.api.nvim_buf_is_valid(req.buf) then
    pcall(vim.api.nvim_buf_del_extmark, req.buf, P.ns, s.mark)
  end
end

--- Show {req.result} as the change of rows {first}-{last} (0-based): the old lines
--- highlighted, the new ones below them, and how to take or drop it.
---@param req table
---@param first integer
---@param last integer
P.show = function(req, first, last)
  local buf, marks = req.buf, {}
  for row = first, last do
    table.insert(marks, vim.api.nvim_buf_set_extmark(buf, P.ns, row, 0, { line_hl_group = 'AgiDelete' }))
  end
  local virt = P.virt_lines(buf, req.result, 'AgiAdd')
  table.insert(virt, { { 'agi: :AgiAccept applies this change, :AgiReject drops it', 'AgiHint' } })
  table.insert(marks, vim.api.nvim_buf_set_extmark(buf, P.ns, last, 0, { virt_lines = virt }))
  req.preview_marks = marks
end

--- Remove what P.show() showed.
---@param req table
P.hide = function(req)
  if not vim.api.nvim_buf_is_valid(req.buf) then return end
  for _, mark in ipairs(req.preview_marks or {}) do
    pcall(vim.api.nvim_buf_del_extmark, req.buf, P.ns, mark)
  end
  req.preview_marks = nil
end

--- {lines} as `virt_lines` in highlight group {group}, tabs expanded (virtual text shows a tab
--- as one cell).
---@param buf integer
---@param lines string[]
---@param group string
---@return table
P.virt_lines = function(buf, lines, group)
  local virt = {}
  for _, line in ipairs(lines) do
    table.insert(virt, { { H.expand(buf, line), group } })
  end
  return virt
end

-- Helpers ---------------------------------------------------------------------
H.expand = function(buf, line)
  if not line:find('\t', 1, true) then return line end
  return (line:gsub('\t', string.rep(' ', vim.bo[buf].tabstop)))
end

H.is_fence = function(line) return line:match('^%s*```') ~= nil or line:match('^%s*~~~') ~= nil end

-- Only the last line can still grow: the chunks of the others are made once.
H.render = function(req, s, row)
  local virt = {}
  for _, key in ipairs(s.order) do
    table.insert(virt, { { '  ⏺ ' .. s.tools[key], 'AgiTool' } })
  end
  local count = #s.lines
  for i = 1, count do
    local chunk = s.cache[i]
    if chunk == nil then
      local line = s.lines[i]
      chunk = false -- fences are not shown, nor the line just begun
      if not (H.is_fence(line) or (i == count and line == '')) then
        chunk = { { H.expand(req.buf, line), 'AgiStream' } }
      end
      if i < count then s.cache[i] = chunk end
    end
    if chunk then table.insert(virt, chunk) end
  end
  if #virt == 0 then
    if s.mark ~= nil then pcall(vim.api.nvim_buf_del_extmark, req.buf, P.ns, s.mark) end
    s.mark = nil
    return
  end
  s.mark = vim.api.nvim_buf_set_extmark(req.buf, P.ns, row, 0, { id = s.mark, virt_lines = virt })
end

return P
