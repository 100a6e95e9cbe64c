--- The hunks of a next-edit suggestion (lua/agi/nes.lua) as marks: each with a sign, the rows
--- it replaces highlighted, its new lines as virtual lines; and the end-of-line hint naming
--- the hunks out of view.

local M = {}

M.ns = vim.api.nvim_create_namespace('agi-nes')

--- Define the highlight groups (default links: a colour scheme may set its own).
M.highlight = function()
  local link = function(name, to) vim.api.nvim_set_hl(0, name, { link = to, default = true }) end
  link('AgiNesDelete', 'DiffDelete') -- rows a hunk replaces
  link('AgiNesAdd', 'DiffAdd') -- the new text
  link('AgiNesSign', 'DiagnosticHint') -- the sign of a hunk
  link('AgiNesHint', 'Comment') -- where a hunk out of view is
end

--- Mark hunk {h} (`{lines, at}`) over rows {first}..{last} (0-based) of {buf}, whose lines are
--- {old}; returns the shown hunk (`{at, old, lines, mark, marks}`).
---@return table
M.place = function(buf, h, first, last, old)
  local item = { at = h.at, old = old, lines = h.lines, marks = {} }
  item.mark = vim.api.nvim_buf_set_extmark(buf, M.ns, first, 0, {
    end_row = last,
    end_col = #old[#old],
    right_gravity = true,
    end_right_gravity = false,
    sign_text = '»',
    sign_hl_group = 'AgiNesSign',
    hl_group = h.at == 'replace' and 'AgiNesDelete' or nil,
    hl_eol = h.at == 'replace',
  })
  if #item.lines > 0 then
    local virt = require('agi.preview').virt_lines(buf, item.lines, 'AgiNesAdd')
    local above = item.at == 'above'
    local mark = vim.api.nvim_buf_set_extmark(buf, M.ns, above and first or last, 0, { virt_lines = virt, virt_lines_above = above })
    table.insert(item.marks, mark)
  end
  return item
end

--- What a hunk shows, as one string: two hunks with the same key look the same.
---@return string
M.key = function(first, at, old, lines) return table.concat({ first, at, table.concat(old, '\n'), table.concat(lines, '\n') }, '\0') end

--- Remove the marks of shown hunk {item}.
M.unmark = function(buf, item)
  if not vim.api.nvim_buf_is_valid(buf) then return end
  pcall(vim.api.nvim_buf_del_extmark, buf, M.ns, item.mark)
  for _, mark in ipairs(item.marks) do
    pcall(vim.api.nvim_buf_del_extmark, buf, M.ns, mark)
  end
end

--- Name the hunks among {items} (with their rows now) that are out of the current window's
--- view at the end of the cursor line; {hint}: the hint shown (`{mark, text}`), kept when it
--- says the same on the same line. Returns the hint shown now, or nil.
---@return table|nil
M.hint = function(buf, items, hint)
  local top, bottom = vim.fn.line('w0') - 1, vim.fn.line('w$') - 1
  local away, text = {}, nil
  for _, item in ipairs(items) do
    if item.last < top or item.first > bottom then table.insert(away, tostring(item.first + 1)) end
  end
  if #away > 0 then text = string.format(' agi: next edit at line%s %s', #away == 1 and '' or 's', table.concat(away, ', ')) end
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  if hint ~= nil then
    if hint.text == text and vim.api.nvim_buf_get_extmark_by_id(buf, M.ns, hint.mark, {})[1] == row then return hint end
    pcall(vim.api.nvim_buf_del_extmark, buf, M.ns, hint.mark)
  end
  if text == nil then return nil end
  local opts = { virt_text = { { text, 'AgiNesHint' } }, virt_text_pos = 'eol' }
  return { mark = vim.api.nvim_buf_set_extmark(buf, M.ns, row, 0, opts), text = text }
end

return M
