--- The keys of inline suggestions (lua/agi/suggest.lua): mapped while suggestions are active;
--- a key pressed with nothing to take does what it did before agi mapped it.

local M, H = {}, {}

H.mapped = {} -- the keys mapped: { mode, lhs, previous }

--- Map {keys} (suggest.keys: accept, accept_word, accept_line, dismiss; false: none); a press
--- calls {press}(action) with "all", "word", "line" or "dismiss", which returns whether it did
--- something (else the key falls through).
M.map = function(keys, press)
  M.unmap()
  if keys == false then return end
  local actions = { accept = 'all', accept_word = 'word', accept_line = 'line', dismiss = 'dismiss' }
  for name, action in pairs(actions) do
    local lhs = keys[name]
    if type(lhs) == 'string' and lhs ~= '' then
      -- Normal mode: for :AgiSuggest's line below
      local modes = (action == 'all' or action == 'dismiss') and { 'i', 'n' } or { 'i' }
      for _, mode in ipairs(modes) do
        H.map(mode, lhs, action, press)
      end
    end
  end
end

--- Remove agi's mappings; the keys' previous mappings come back.
M.unmap = function()
  for i = #H.mapped, 1, -1 do
    local mode, lhs, previous = unpack(H.mapped[i])
    pcall(vim.keymap.del, mode, lhs)
    if previous ~= nil then pcall(vim.fn.mapset, mode, false, previous) end
  end
  H.mapped = {}
end

H.map = function(mode, lhs, action, press)
  local previous = vim.fn.maparg(lhs, mode, false, true)
  if next(previous) == nil or previous.buffer == 1 then previous = nil end
  local pressed = function()
    if not press(action) then H.fallback(mode, lhs) end
  end
  vim.keymap.set(mode, lhs, pressed, { desc = 'agi suggest: ' .. action })
  table.insert(H.mapped, { mode, lhs, previous })
end

--- Nothing shown: the key does what it did before agi mapped it.
H.fallback = function(mode, lhs)
  local previous
  for _, m in ipairs(H.mapped) do
    if m[1] == mode and m[2] == lhs then previous = m[3] end
  end
  local termcodes = function(s) return vim.api.nvim_replace_termcodes(s, true, true, true) end
  if previous == nil then return vim.api.nvim_feedkeys(termcodes(lhs), 'ni', false) end
  local keys
  if previous.callback ~= nil then
    if previous.expr ~= 1 then return previous.callback() end
    keys = previous.callback() or ''
    if previous.replace_keycodes == 1 then keys = termcodes(keys) end
  elseif previous.expr == 1 then
    keys = vim.api.nvim_eval(previous.rhs)
  else
    keys = termcodes(previous.rhs)
  end
  vim.api.nvim_feedkeys(keys, previous.noremap == 1 and 'ni' or 'i', false)
end

return M
