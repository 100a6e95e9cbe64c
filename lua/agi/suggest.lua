--- *agi.suggest* Inline suggestions as you type, like GitHub Copilot. Off by default.
---
--- In Insert mode, after `debounce_ms` without typing, the text around the cursor (bounded) goes
--- to agi's Python host, which asks the model on a worker thread (a fill-in-the-middle endpoint,
--- else a chat request) and streams the suggestion back through `nvim.async_call`. It shows as
--- ghost text: an inline extmark on the cursor line, virtual lines below it. The keystroke path
--- only compares text and restarts a timer: it never calls the host and never blocks; cancelling
--- the request in flight is scheduled with |vim.schedule()|. See |agi-suggest|.

local M, H = {}, {}
local Around, Ghost, Keys = require('agi.around'), require('agi.ghost'), require('agi.keys')
local Options, U = require('agi.options'), require('agi.util')

--- The `suggest` table of `require('agi').setup()`.
M.config = {
  -- ask automatically after a pause in Insert mode (:AgiSuggest asks either way)
  enabled = false,
  -- milliseconds without typing before asking
  debounce_ms = 250,
  -- "auto" (by provider) | "completions" (/v1/completions with suffix) | "infill" (llama.cpp)
  -- | "chat" (a chat request with a fill-in-the-middle instruction)
  fim = 'auto',
  -- a model and endpoint just for suggestions; nil: the plugin's (or agi's) own
  model = nil,
  base_url = nil,
  -- lines of context sent before and after the cursor (at most 32 KiB each way)
  context_lines = 300,
  -- the longest suggestion, in tokens (FIM endpoints) and in lines (all)
  max_tokens = 128,
  max_lines = 16,
  -- buffers larger than this many bytes get no suggestions
  max_filesize = 1024 * 1024,
  -- filetype = true|false; '*' is the default for the rest
  filetypes = { ['*'] = true, help = false, gitcommit = false, gitrebase = false, hgcommit = false, svn = false, cvs = false },
  -- extra fields for the request body, e.g. { temperature = 0.2, stop = { '\n\n' } }
  params = {},
  -- keys while a suggestion is shown (they fall through otherwise); false or '' leaves one
  -- unmapped, `keys = false` all of them
  keys = { accept = '<Tab>', accept_word = '<M-Right>', accept_line = '<M-Down>', dismiss = '<C-]>' },
  nes = false, -- next-edit suggestions (lua/agi/nes.lua), off by default: see |agi-nes|
  nes_delay = 300, -- ms without a change before asking
  nes_history = 5, -- how many of the last changes go with the request, as diffs
  nes_window = 60, -- lines around the cursor the model may rewrite
  nes_format = 'chat', -- "chat" (agi's prompt) | "zeta" (Zed's Zeta) | "sweep" (sweep-next-edit)
  nes_model = nil, -- a model just for next edits; nil: `model` (else the plugin's)
  nes_base_url = nil, -- its endpoint; nil: `base_url`
}

--- Validate {config}, merge it into the defaults and apply it (called by `require('agi').setup`).
---@param config table|nil
M.setup = function(config)
  M.config = H.setup_config(config)
  H.highlight()
  if M.config.enabled then
    H.activate()
  else
    H.deactivate()
  end
end

--- Ask now at the cursor (in Normal mode: for the line below), whatever `enabled` says.
---@return integer|nil The request id
M.trigger = function()
  local buf = vim.api.nvim_get_current_buf()
  local ok, why = Around.eligible(buf, M.config)
  if not ok then return U.notify(why) end
  if not H.active then H.activate() end
  H.stop_timer()
  H.dismiss()
  H.cancel(buf)
  local mode = vim.api.nvim_get_mode().mode
  local cursor = vim.api.nvim_win_get_cursor(0)
  return H.ask(buf, cursor[1] - 1, cursor[2], not H.is_insert(mode))
end

--- Accept the shown suggestion: `"all"`, the next `"word"` or the rest of the `"line"`.
---@param kind string|nil Default "all"
---@return boolean Whether there was something to accept
M.accept = function(kind)
  kind = kind or 'all'
  local insert = H.is_insert(vim.api.nvim_get_mode().mode)
  if insert then H.sync() end
  local s, chunk = H.acceptable(kind)
  if chunk == nil then return false end
  if not insert then
    -- Normal mode (:AgiSuggest for the line below): all of it, one undo step
    H.dismiss()
    local lines = vim.split(chunk, '\n', { plain = true })
    vim.api.nvim_buf_set_text(s.buf, s.row, s.col, s.row, s.col, lines)
    vim.api.nvim_win_set_cursor(0, { s.row + #lines, math.max(0, #lines[#lines] - 1) })
    return true
  end
  if kind == 'all' then H.dismiss() end
  -- typed as a register's text, so it joins the insert's undo step; the rest stays shown
  H.queued = chunk
  vim.api.nvim_feedkeys(H.insert_keys, 'ni', false)
  return true
end

--- Hide the suggestion and cancel the request in flight.
M.dismiss = function()
  local s = H.state
  H.dismiss()
  H.cancel(s and s.buf or vim.api.nvim_get_current_buf())
end

--- The part of the suggestion that is shown, or nil.
---@return string|nil
M.visible = function()
  local s = H.state
  if s == nil or s.mark == nil then return nil end
  return s.text:sub(#s.typed + 1)
end

-- Called from the Python host (agi.frontends.nvim.suggest) through nvim_exec_lua.
M._event = function(id, event)
  if event.type == 'done' or event.type == 'error' then H.settle(id) end
  local s = H.state
  local current = s ~= nil and s.id == id
  if event.type == 'error' then
    if current then H.dismiss() end
    return H.status.set('agi: suggestion failed: ' .. vim.split(tostring(event.message), '\n')[1])
  end
  if not current then return end -- a newer keystroke moved on
  H.status.clear()
  local text = event.text or ''
  if event.type == 'done' then
    s.done = true
    if text == '' then return H.dismiss() end
    Around.remember(s.prefix, s.suffix, text)
  end
  s.text = s.lead .. text
  if not H.agrees(s) or (s.done and #s.text <= #s.typed) then return H.dismiss() end
  H.render(s)
end

-- The text <C-r><C-o>= inserts on accepting.
M._queued = function()
  local text = H.queued or ''
  H.queued = nil
  return text
end

--- The defaults (for lua/agi/options.lua).
M._defaults = function() return vim.deepcopy(H.default_config) end

-- Helper data ================================================================
H.default_config = vim.deepcopy(M.config)
H.state = nil -- the suggestion shown or streaming in
H.status = U.status() -- a failure, for statuslines
H.pending = {} -- the request in flight, by buffer
H.next_id = 0
H.active = false
H.insert_keys = vim.api.nvim_replace_termcodes("<C-r><C-o>=v:lua.require'agi.suggest'._queued()<CR>", true, false, true)

-- Helper functionality =======================================================
-- Settings -------------------------------------------------------------------
H.setup_config = function(config) return Options.suggest(config, H.default_config) end

H.highlight = function() vim.api.nvim_set_hl(0, 'AgiSuggestion', { link = 'Comment', default = true }) end

H.is_insert = function(mode) return mode:sub(1, 1) == 'i' or mode:sub(1, 2) == 'ni' end

--- Autocommands and keys; `enabled` decides only whether a pause asks by itself.
H.activate = function()
  H.active = true
  H.timer = H.timer or vim.uv.new_timer()
  local group = vim.api.nvim_create_augroup('agi-suggest', { clear = true })
  local au = function(events, callback) vim.api.nvim_create_autocmd(events, { group = group, callback = callback }) end
  au({ 'InsertEnter', 'TextChangedI', 'TextChangedP', 'CursorMovedI' }, H.on_change)
  au({ 'CursorMoved', 'TextChanged' }, H.on_normal)
  au({ 'InsertLeave', 'BufLeave', 'WinLeave' }, function()
    H.stop_timer()
    M.dismiss()
  end)
  au('BufUnload', function(ev)
    if H.state ~= nil and H.state.buf == ev.buf then H.dismiss() end
    H.cancel(ev.buf)
  end)
  au('ColorScheme', H.highlight)
  Keys.map(M.config.keys, H.press)
end

H.deactivate = function()
  if not H.active then return end
  H.active = false
  H.stop_timer()
  pcall(vim.api.nvim_del_augroup_by_name, 'agi-suggest')
  Keys.unmap()
  M.dismiss()
end

H.stop_timer = function()
  if H.timer ~= nil then H.timer:stop() end
end

-- Keystrokes -----------------------------------------------------------------
--- On every change in Insert mode: keep the suggestion when the text typed matches it, else
--- drop it, cancel the request in flight and restart the pause timer. No host call here.
H.on_change = function()
  local buf = vim.api.nvim_get_current_buf()
  local cursor = vim.api.nvim_win_get_cursor(0)
  local tick = vim.api.nvim_buf_get_changedtick(buf)
  local last = H.last
  if last ~= nil and last[1] == buf and last[2] == tick and last[3] == cursor[1] and last[4] == cursor[2] then return end
  H.last = { buf, tick, cursor[1], cursor[2] }
  local s = H.state
  if s ~= nil and s.buf == buf and H.consume(s, cursor[1] - 1, cursor[2]) then return end
  H.dismiss()
  H.cancel(buf)
  if M.config.enabled and Around.allowed(buf, M.config) then
    H.timer:start(M.config.debounce_ms, 0, H.fire_soon)
  else
    H.stop_timer()
  end
end

--- Normal mode: a suggestion for the line below goes when the cursor leaves the line or the
--- text changes.
H.on_normal = function(ev)
  local s = H.state
  if s == nil or not s.normal or s.typed ~= '' then return end
  local moved = vim.api.nvim_win_get_cursor(0)[1] - 1 ~= s.row
  if ev.buf ~= s.buf or moved or vim.api.nvim_buf_get_changedtick(s.buf) ~= s.tick then M.dismiss() end
end

--- Match the text between the suggestion's anchor and the cursor against the suggestion: when
--- it is a prefix, the rest stays shown from the cursor on.
H.consume = function(s, row, col)
  if row < s.row or row > s.row + 100 then return false end
  if vim.api.nvim_buf_line_count(s.buf) ~= s.count + row - s.row then return false end
  local typed
  if row == s.row then
    if col < s.col then return false end
    local line = vim.api.nvim_buf_get_lines(s.buf, row, row + 1, true)[1]
    if line:sub(col + 1) ~= s.after or line:sub(1, s.col) ~= s.before then return false end
    typed = line:sub(s.col + 1, col)
  else
    local lines = vim.api.nvim_buf_get_lines(s.buf, s.row, row + 1, true)
    local first, last = lines[1], lines[#lines]
    if first:sub(1, s.col) ~= s.before or last:sub(col + 1) ~= s.after then return false end
    lines[1], lines[#lines] = first:sub(s.col + 1), last:sub(1, col)
    typed = table.concat(lines, '\n')
  end
  local before = s.typed
  s.typed = typed
  if not H.agrees(s) or (s.done and #typed >= #s.text) then
    s.typed = before
    return false
  end
  s.at = { row, col }
  H.render(s)
  return true
end

--- The text typed since the anchor is a prefix of the suggestion (of what came so far, while it
--- streams in: typing past it, or before any came, cancels the request).
H.agrees = function(s) return s.text:sub(1, #s.typed) == s.typed end

--- Bring the state up to the cursor (keys typed ahead may not have fired TextChangedI yet).
H.sync = function()
  local s = H.state
  if s == nil then return end
  local buf, cursor = vim.api.nvim_get_current_buf(), vim.api.nvim_win_get_cursor(0)
  local at = s.at or { s.row, s.col }
  if buf == s.buf and at[1] == cursor[1] - 1 and at[2] == cursor[2] then return end
  if buf ~= s.buf or not H.consume(s, cursor[1] - 1, cursor[2]) then M.dismiss() end
end

-- Requests -------------------------------------------------------------------
H.fire_soon = vim.schedule_wrap(function() H.fire() end)

H.fire = function()
  if not M.config.enabled or H.state ~= nil then return end
  local mode = vim.api.nvim_get_mode()
  if mode.mode ~= 'i' or mode.blocking or vim.fn.pumvisible() == 1 then return end
  local buf = vim.api.nvim_get_current_buf()
  if not Around.eligible(buf, M.config) then return end
  local cursor = vim.api.nvim_win_get_cursor(0)
  H.ask(buf, cursor[1] - 1, cursor[2], false)
end

--- Send the text around (row, col) to the host; below: for a new line below row.
H.ask = function(buf, row, col, below)
  local count = vim.api.nvim_buf_line_count(buf)
  local line = vim.api.nvim_buf_get_lines(buf, row, row + 1, true)[1]
  if below then col = #line end
  local prefix, suffix = Around.text(buf, row, col, below, M.config.context_lines)
  H.next_id = H.next_id + 1
  local s = {
    id = H.next_id,
    buf = buf,
    row = row,
    col = col, -- the anchor: where the suggestion goes
    before = line:sub(1, col),
    after = line:sub(col + 1),
    count = count,
    tick = vim.api.nvim_buf_get_changedtick(buf),
    lead = below and '\n' or '',
    normal = below,
    text = '',
    typed = '',
    done = false,
    prefix = prefix,
    suffix = suffix,
  }
  H.state = s
  local hit = Around.recall(prefix, suffix)
  if hit ~= nil then
    s.text, s.done = s.lead .. hit, true
    H.render(s)
    return s.id
  end
  H.pending[buf] = s.id
  local main = require('agi').config
  local name = vim.api.nvim_buf_get_name(buf)
  local payload = {
    id = s.id,
    buf = buf,
    prefix = prefix,
    suffix = suffix,
    filetype = vim.bo[buf].filetype,
    filename = name == '' and '[No Name]' or vim.fn.fnamemodify(name, ':~:.'),
    options = {
      model = M.config.model or main.model,
      base_url = M.config.base_url or main.base_url,
      fim = M.config.fim,
      max_tokens = M.config.max_tokens,
      max_lines = M.config.max_lines,
      params = next(M.config.params) ~= nil and M.config.params or vim.empty_dict(),
    },
  }
  local ok, err = pcall(vim.fn.AgiHostSuggest, payload)
  if not ok then M._event(s.id, { type = 'error', message = H.host_failure(tostring(err)) }) end
  return s.id
end

H.host_failure = function(err)
  if err:find('E117') then return 'agi is not registered with the Python host: run :UpdateRemotePlugins (:checkhealth agi)' end
  return 'cannot reach the Python host: ' .. err
end

--- The request of {buf} in flight is cancelled: at once here, on the host a moment later.
H.cancel = function(buf)
  local id = H.pending[buf]
  if id == nil then return end
  H.pending[buf] = nil
  vim.schedule(function() pcall(vim.fn.AgiHostSuggestCancel, buf, id) end)
end

H.settle = function(id)
  for buf, pending in pairs(H.pending) do
    if pending == id then H.pending[buf] = nil end
  end
end

-- Ghost text -----------------------------------------------------------------
H.render = function(s)
  if not Ghost.render(s) then H.dismiss() end
end

H.dismiss = function()
  local s = H.state
  if s == nil then return end
  H.state = nil
  Ghost.unmark(s)
  if not s.done then H.cancel(s.buf) end
end

-- Accepting ------------------------------------------------------------------
--- The shown suggestion and the part of it {kind} takes, or nil.
H.acceptable = function(kind)
  local s = H.state
  if s == nil or s.mark == nil or s.buf ~= vim.api.nvim_get_current_buf() then return nil end
  return s, Ghost.part(s, kind)
end

--- A suggestion key: whether it did something (else the key does what it did before).
H.press = function(action)
  if action == 'dismiss' then
    local shown = M.visible() ~= nil
    M.dismiss()
    return shown
  end
  return M.accept(action)
end

return M
