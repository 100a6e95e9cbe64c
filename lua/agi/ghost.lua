--- The ghost text of an inline suggestion (lua/agi/suggest.lua): what is left of it after the
--- text typed since its anchor, drawn as an inline extmark on the cursor line and virtual lines
--- below it; and the part of it that accepting a word, a line or all of it takes.

local M, H = {}, {}

M.ns = vim.api.nvim_create_namespace('agi-suggest')

--- Draw suggestion {s} (`{buf, row, col, text, typed, at, mark}`) from its anchor, or from
--- where typing has reached. Returns false when it cannot be drawn (the caller dismisses it).
M.render = function(s)
  if not vim.api.nvim_buf_is_valid(s.buf) then return false end
  local rest = #s.typed < #s.text and s.text:sub(#s.typed + 1) or ''
  if rest == '' then
    M.unmark(s)
    return true
  end
  local at = s.at or { s.row, s.col }
  local lines = vim.split(rest, '\n', { plain = true })
  local opts = { id = s.mark, hl_mode = 'combine', priority = 1000 }
  if lines[1] ~= '' then
    opts.virt_text, opts.virt_text_pos = { { H.expand(lines[1], s.buf), 'AgiSuggestion' } }, 'inline'
  end
  if #lines > 1 then
    local virt = {}
    for i = 2, #lines do
      virt[#virt + 1] = { { H.expand(lines[i], s.buf), 'AgiSuggestion' } }
    end
    opts.virt_lines = virt
  end
  local ok, mark = pcall(vim.api.nvim_buf_set_extmark, s.buf, M.ns, at[1], at[2], opts)
  if ok then s.mark = mark end
  return ok
end

--- Remove {s}'s ghost text.
M.unmark = function(s)
  if s.mark ~= nil and vim.api.nvim_buf_is_valid(s.buf) then pcall(vim.api.nvim_buf_del_extmark, s.buf, M.ns, s.mark) end
  s.mark = nil
end

--- The part of the shown suggestion {s} that {kind} takes: "word", "line" or "all".
M.part = function(s, kind)
  local rest = s.text:sub(#s.typed + 1)
  if kind == 'word' then return rest:match('^%s*[%w_]+') or rest:match('^%s*[^%w_%s]+') or rest end
  if kind == 'line' then return rest:match('^\n*[^\n]*') end
  return rest
end

H.expand = function(text, buf) return (text:gsub('\t', string.rep(' ', vim.bo[buf].tabstop))) end

return M
