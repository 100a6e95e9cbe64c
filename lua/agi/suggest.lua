--- *agi.suggest* Inline suggestions as you type, like GitHub Copilot. Off by default.
---
--- In Insert mode, after `debounce_ms` without typing, the text around the cursor (bounded) goes
--- to agi's Python host, which asks the model on a worker thread (a fill-in-the-middle endpoint,
--- else a chat request) and streams the suggestion back through `nvim.async_call`. It shows as
--- ghost text: an inline extmark on the cursor line, virtual lines below it. The keystroke path
--- only compares text and restarts a timer: it never calls the host and never blocks; cancelling
--- the request in flight is scheduled with |vim.schedule()|. See |agi-suggest|.

local M, H = {}, {}

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
  local ok, why = H.eligible(buf)
  if not ok then return H.notify(why) end
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

-- Called from the Python host (agi.nvim.suggest) through nvim_exec_lua.
M._event = function(id, event)
  if event.type == 'done' or event.type == 'error' then H.settle(id) end
  local s = H.state
  local current = s ~= nil and s.id == id
  if event.type == 'error' then
    if current then H.dismiss() end
    return H.set_status('agi: suggestion failed: ' .. vim.split(tostring(event.message), '\n')[1])
  end
  if not current then return end -- a newer keystroke moved on
  H.clear_status()
  local text = event.text or ''
  if event.type == 'done' then
    s.done = true
    if text == '' then return H.dismiss() end
    H.remember(s.prefix, s.suffix, text)
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

M._validate = function(config) return H.setup_config(config) end

-- Helper data ================================================================
H.default_config = vim.deepcopy(M.config)
H.fim_choices = { 'auto', 'completions', 'infill', 'chat' }
H.ns = vim.api.nvim_create_namespace('agi-suggest')
H.max_context = 32 * 1024 -- bytes of prefix, and of suffix
H.cache_size = 8
H.state = nil -- the suggestion shown or streaming in
H.pending = {} -- the request in flight, by buffer
H.cache = {} -- recent suggestions: { prefix, suffix, text }, newest last
H.next_id = 0
H.mapped = {} -- the keys mapped: { mode, lhs, previous }
H.active = false
H.insert_keys = vim.api.nvim_replace_termcodes("<C-r><C-o>=v:lua.require'agi.suggest'._queued()<CR>", true, false, true)

-- Helper functionality =======================================================
-- Settings -------------------------------------------------------------------
H.setup_config = function(config)
  H.check('suggest', config, 'table', true)
  config = vim.tbl_deep_extend('force', vim.deepcopy(H.default_config), config or {})
  H.check('suggest.enabled', config.enabled, 'boolean')
  H.check('suggest.model', config.model, 'string', true)
  H.check('suggest.base_url', config.base_url, 'string', true)
  for _, name in ipairs({ 'debounce_ms', 'context_lines', 'max_tokens', 'max_lines', 'max_filesize' }) do
    H.check('suggest.' .. name, config[name], 'number')
    local least = (name == 'debounce_ms' or name == 'context_lines') and 0 or 1
    if config[name] < least then H.error(string.format('`suggest.%s` should be %d or more, not %s', name, least, config[name])) end
  end
  if not vim.tbl_contains(H.fim_choices, config.fim) then
    H.error('`suggest.fim` should be "auto", "completions", "infill" or "chat", not ' .. vim.inspect(config.fim))
  end
  H.check('suggest.filetypes', config.filetypes, 'table')
  for ft, on in pairs(config.filetypes) do
    H.check('suggest.filetypes.' .. ft, on, 'boolean')
  end
  H.check('suggest.params', config.params, 'table')
  if config.keys ~= false then
    H.check('suggest.keys', config.keys, 'table')
    for name, lhs in pairs(config.keys) do
      if H.default_config.keys[name] == nil then H.error('`suggest.keys.' .. name .. '` is not a key agi maps') end
      if lhs ~= false then H.check('suggest.keys.' .. name, lhs, 'string') end
    end
  end
  return config
end

H.check = function(name, value, kind, optional)
  if (value == nil and optional) or type(value) == kind then return end
  H.error(string.format('`%s` should be %s, not %s', name, kind, type(value)))
end

H.error = function(msg) error('(agi) ' .. msg, 0) end

H.notify = function(msg) vim.notify('(agi) ' .. msg, vim.log.levels.INFO) end

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
  H.map_keys()
end

H.deactivate = function()
  if not H.active then return end
  H.active = false
  H.stop_timer()
  pcall(vim.api.nvim_del_augroup_by_name, 'agi-suggest')
  H.unmap_keys()
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
  if M.config.enabled and H.allowed(buf) then
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
  if not H.eligible(buf) then return end
  local cursor = vim.api.nvim_win_get_cursor(0)
  H.ask(buf, cursor[1] - 1, cursor[2], false)
end

--- Cheap enough for every keystroke: the buffer's kind and filetype.
H.allowed = function(buf)
  if vim.g.agi_disable == true or vim.b[buf].agi_disable == true then return false, 'disabled in this buffer (b:agi_disable)' end
  local buftype = vim.bo[buf].buftype
  if buftype ~= '' and buftype ~= 'acwrite' then return false, 'no suggestions in a ' .. buftype .. ' buffer' end
  if not vim.bo[buf].modifiable then return false, 'the buffer is not modifiable' end
  local filetype = vim.bo[buf].filetype
  local on = M.config.filetypes[filetype]
  if on == nil then on = M.config.filetypes['*'] end
  if on == false then return false, 'suggestions are off for filetype ' .. (filetype == '' and '(none)' or filetype) end
  return true
end

H.eligible = function(buf)
  local ok, why = H.allowed(buf)
  if not ok then return false, why end
  local size = vim.api.nvim_buf_get_offset(buf, vim.api.nvim_buf_line_count(buf))
  if size > M.config.max_filesize then return false, 'the buffer is larger than suggest.max_filesize' end
  return true
end

--- Send the text around (row, col) to the host; below: for a new line below row.
H.ask = function(buf, row, col, below)
  local n, count = M.config.context_lines, vim.api.nvim_buf_line_count(buf)
  local line = vim.api.nvim_buf_get_lines(buf, row, row + 1, true)[1]
  if below then col = #line end
  local before = vim.api.nvim_buf_get_lines(buf, math.max(0, row - n), row, true)
  local after = vim.api.nvim_buf_get_lines(buf, row + 1, math.min(count, row + 1 + n), true)
  table.insert(before, line:sub(1, col))
  if not below then table.insert(after, 1, line:sub(col + 1)) end
  local prefix = table.concat(H.nearest(before, true), '\n') .. (below and '\n' or '')
  local suffix = table.concat(H.nearest(after, false), '\n')
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
  local hit = H.recall(prefix, suffix)
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

-- Cache ----------------------------------------------------------------------
H.remember = function(prefix, suffix, text)
  table.insert(H.cache, { prefix, suffix, text })
  if #H.cache > H.cache_size then table.remove(H.cache, 1) end
end

--- What is left of a recent suggestion when the text before the cursor has grown into it.
H.recall = function(prefix, suffix)
  for i = #H.cache, 1, -1 do
    local p, s, text = unpack(H.cache[i])
    if s == suffix and #prefix >= #p and prefix:sub(1, #p) == p then
      local typed = prefix:sub(#p + 1)
      if #typed < #text and text:sub(1, #typed) == typed then return text:sub(#typed + 1) end
    end
  end
  return nil
end

-- Ghost text -----------------------------------------------------------------
H.render = function(s)
  if not vim.api.nvim_buf_is_valid(s.buf) then return H.dismiss() end
  local rest = #s.typed < #s.text and s.text:sub(#s.typed + 1) or ''
  if rest == '' then return H.unmark(s) end
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
  local ok, mark = pcall(vim.api.nvim_buf_set_extmark, s.buf, H.ns, at[1], at[2], opts)
  if ok then
    s.mark = mark
  else
    H.dismiss()
  end
end

H.expand = function(text, buf) return (text:gsub('\t', string.rep(' ', vim.bo[buf].tabstop))) end

H.unmark = function(s)
  if s.mark ~= nil and vim.api.nvim_buf_is_valid(s.buf) then pcall(vim.api.nvim_buf_del_extmark, s.buf, H.ns, s.mark) end
  s.mark = nil
end

H.dismiss = function()
  local s = H.state
  if s == nil then return end
  H.state = nil
  H.unmark(s)
  if not s.done then H.cancel(s.buf) end
end

-- Accepting ------------------------------------------------------------------
--- The shown suggestion and the part of it {kind} takes, or nil.
H.acceptable = function(kind)
  local s = H.state
  if s == nil or s.mark == nil or s.buf ~= vim.api.nvim_get_current_buf() then return nil end
  local rest = s.text:sub(#s.typed + 1)
  if kind == 'word' then return s, rest:match('^%s*[%w_]+') or rest:match('^%s*[^%w_%s]+') or rest end
  if kind == 'line' then return s, rest:match('^\n*[^\n]*') end
  return s, rest
end

H.map_keys = function()
  H.unmap_keys()
  local keys = M.config.keys
  if keys == false then return end
  local actions = { accept = 'all', accept_word = 'word', accept_line = 'line', dismiss = 'dismiss' }
  for name, action in pairs(actions) do
    local lhs = keys[name]
    if type(lhs) == 'string' and lhs ~= '' then
      -- Normal mode: for :AgiSuggest's line below
      local modes = (action == 'all' or action == 'dismiss') and { 'i', 'n' } or { 'i' }
      for _, mode in ipairs(modes) do
        H.map(mode, lhs, action)
      end
    end
  end
end

H.map = function(mode, lhs, action)
  local previous = vim.fn.maparg(lhs, mode, false, true)
  if next(previous) == nil or previous.buffer == 1 then previous = nil end
  vim.keymap.set(mode, lhs, function() H.press(mode, lhs, action) end, { desc = 'agi suggest: ' .. action })
  table.insert(H.mapped, { mode, lhs, previous })
end

H.unmap_keys = function()
  for i = #H.mapped, 1, -1 do
    local mode, lhs, previous = unpack(H.mapped[i])
    pcall(vim.keymap.del, mode, lhs)
    if previous ~= nil then pcall(vim.fn.mapset, mode, false, previous) end
  end
  H.mapped = {}
end

H.press = function(mode, lhs, action)
  if action == 'dismiss' then
    local shown = M.visible() ~= nil
    M.dismiss()
    if shown then return end
  elseif M.accept(action) then
    return
  end
  H.fallback(mode, lhs)
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

-- Status ---------------------------------------------------------------------
--- Errors go to g:agi_status (statuslines), never to messages: typing on must not be noisy.
H.set_status = function(text)
  H.status = text
  vim.g.agi_status = text
  pcall(vim.cmd.redrawstatus)
end

H.clear_status = function()
  if H.status ~= nil and vim.g.agi_status == H.status then vim.g.agi_status = '' end
  H.status = nil
end

return M
