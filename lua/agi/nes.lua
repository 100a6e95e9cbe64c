--- *agi.nes* Next-edit suggestions: after a change, the edit that most likely comes next.
---
--- Off by default (`suggest.nes`, |:AgiNes|). The keystroke path only restarts a timer and, when
--- a request is in flight, schedules its cancel (|vim.schedule()|): it never calls the Python
--- host. After `suggest.nes_delay` ms without a change, the changes since the last request go
--- into the history as unified diffs and the host is asked, with the window of the buffer around
--- the cursor, for that window rewritten (agi.frontends.nvim.nes); its answer comes back as hunks,
--- shown where they apply, with a sign, and named at the end of the cursor line when they are
--- out of view. A hunk whose lines changed since is dropped. See |agi-nes|.
--- Its options are the `suggest` table's `nes*` fields (lua/agi/suggest.lua).

local M, H = {}, {}
local Around, U = require('agi.around'), require('agi.util')

M.ns = vim.api.nvim_create_namespace('agi-nes')

--- Turn next-edit suggestions on, off, or over ("toggle", the default).
---@param how string|nil "on" | "off" | "toggle"
---@return boolean Whether they are on now
M.set = function(how)
  local config = H.config()
  how = how == nil and 'toggle' or vim.trim(how)
  if how == '' then how = 'toggle' end
  if how ~= 'on' and how ~= 'off' and how ~= 'toggle' then
    U.notify(':AgiNes takes on, off or toggle, not ' .. vim.inspect(how), 'ERROR')
    return config.nes
  end
  if how == 'toggle' then how = config.nes and 'off' or 'on' end
  config.nes = how == 'on'
  M._apply()
  return config.nes
end

--- Move the cursor to the next hunk shown in the current buffer (after the cursor, wrapping).
---@return boolean Whether there was one
M.jump = function()
  local buf = vim.api.nvim_get_current_buf()
  local rows = H.live(buf)
  if #rows == 0 then return false end
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  local target = rows[1]
  for _, item in ipairs(rows) do
    if item.first > row then
      target = item
      break
    end
  end
  local line = vim.api.nvim_buf_get_lines(buf, target.first, target.first + 1, true)[1]
  vim.api.nvim_win_set_cursor(0, { target.first + 1, #(line:match('^%s*')) })
  return true
end

--- Apply the hunk at the cursor, as one undo step.
---@return boolean Whether one was applied
M.accept = function()
  local buf = vim.api.nvim_get_current_buf()
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  for _, item in ipairs(H.live(buf)) do
    if item.first <= row and row <= item.last then return H.apply(buf, item, true) end
  end
  return false
end

--- Apply every hunk shown in the current buffer, as one undo step.
---@return integer How many were applied
M.accept_all = function()
  local buf = vim.api.nvim_get_current_buf()
  local rows = H.live(buf)
  local count = 0
  for i = #rows, 1, -1 do -- bottom up: the rows above stay put
    if H.apply(buf, rows[i], count == 0) then count = count + 1 end
  end
  return count
end

--- Drop the hunks shown and cancel the request in flight.
M.dismiss = function()
  local buf = vim.api.nvim_get_current_buf()
  H.clear(buf)
  H.cancel(buf)
end

--- Whether hunks are shown in the current buffer (for a <Tab> mapping, see |agi-nes|).
---@return boolean
M.visible = function() return #H.live(vim.api.nvim_get_current_buf()) > 0 end

-- Called from lua/agi/init.lua's setup and from M.set: start or stop watching changes.
M._apply = function()
  if H.config().nes then
    H.activate()
  else
    H.deactivate()
  end
end

-- Ask now, as a pause after a change does (for tests and bench/nvim_nes.py).
M._fire = function()
  H.timer_buf = vim.api.nvim_get_current_buf()
  H.fire()
end

-- Called from the Python host (agi.frontends.nvim.nes) through nvim_exec_lua.
M._event = function(id, event)
  local s = H.flights[id]
  if s == nil then return end -- cancelled: a change came first
  H.flights[id] = nil
  if H.pending[s.buf] == id then H.pending[s.buf] = nil end
  H.clear_status()
  if event.type == 'error' then
    return H.set_status('agi: next edit failed: ' .. vim.split(tostring(event.message), '\n')[1])
  end
  if not vim.api.nvim_buf_is_valid(s.buf) or vim.api.nvim_buf_get_changedtick(s.buf) ~= s.tick then return end
  H.show(s.buf, type(event.hunks) == 'table' and event.hunks or {})
end

-- Helper data ================================================================
H.active = false
H.base = {} -- by buffer: its lines when the last changes were recorded
H.history = {} -- by buffer: the recent changes, unified diffs, oldest first
H.pending = {} -- by buffer: the id of the request in flight
H.flights = {} -- by id: what a request was asked from
H.shown = {} -- by buffer: the hunks shown
H.own = {} -- by buffer: the changedtick after agi applied a hunk (no request for that change)
H.next_id = 0
H.diff = vim.text and vim.text.diff or vim.diff

-- Helper functionality =======================================================
H.config = function() return require('agi.suggest').config end

H.highlight = function()
  local link = function(name, to) vim.api.nvim_set_hl(0, name, { link = to, default = true }) end
  link('AgiNesDelete', 'DiffDelete') -- rows a hunk replaces
  link('AgiNesAdd', 'DiffAdd') -- the new text
  link('AgiNesSign', 'DiagnosticHint') -- the sign of a hunk
  link('AgiNesHint', 'Comment') -- where a hunk out of view is
end

H.activate = function()
  H.active = true
  H.timer = H.timer or vim.uv.new_timer()
  H.highlight()
  local group = vim.api.nvim_create_augroup('agi-nes', { clear = true })
  local au = function(events, callback) vim.api.nvim_create_autocmd(events, { group = group, callback = callback }) end
  au({ 'TextChanged', 'TextChangedI', 'TextChangedP' }, H.on_change)
  au({ 'BufReadPost', 'BufEnter' }, function(ev) H.snapshot(ev.buf, false) end)
  au('BufUnload', function(ev) H.forget(ev.buf) end)
  au('ColorScheme', H.highlight)
  H.snapshot(vim.api.nvim_get_current_buf(), false)
end

H.deactivate = function()
  if not H.active then return end
  H.active = false
  if H.timer then H.timer:stop() end
  pcall(vim.api.nvim_del_augroup_by_name, 'agi-nes')
  for buf in pairs(H.shown) do
    H.clear(buf)
  end
  for buf in pairs(H.pending) do
    H.cancel(buf)
  end
  H.base, H.history = {}, {}
end

--- Remember {buf}'s lines as the base of its next diff ({force}: even if it has one).
H.snapshot = function(buf, force)
  if (H.base[buf] ~= nil and not force) or not vim.api.nvim_buf_is_loaded(buf) then return end
  H.base[buf] = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
end

H.forget = function(buf)
  H.cancel(buf)
  H.shown[buf], H.base[buf], H.history[buf], H.own[buf] = nil, nil, nil, nil
end

-- Keystrokes -----------------------------------------------------------------
--- Every change: the request in flight goes, the pause timer restarts, the shown hunks are
--- checked once the keys typed ahead are in. Nothing here waits on the host.
H.on_change = function(ev)
  local buf = ev.buf
  H.cancel(buf)
  if H.shown[buf] ~= nil and not H.check_soon then
    H.check_soon = true
    vim.schedule(H.drop_stale)
  end
  if H.own[buf] == vim.api.nvim_buf_get_changedtick(buf) then return end
  if Around.allowed(buf, H.config()) then
    H.timer_buf = buf
    H.timer:start(H.config().nes_delay, 0, H.fire_soon)
  end
end

H.fire_soon = vim.schedule_wrap(function() H.fire() end)

-- Requests -------------------------------------------------------------------
H.fire = function()
  local buf = vim.api.nvim_get_current_buf()
  local config = H.config()
  if not H.active or buf ~= H.timer_buf then return end -- the user went elsewhere meanwhile
  if vim.api.nvim_get_mode().blocking or not Around.eligible(buf, config) then return end
  local lines = vim.api.nvim_buf_get_lines(buf, 0, -1, false)
  local base = H.base[buf]
  H.base[buf] = lines
  if base == nil then return end
  local old, new = table.concat(base, '\n') .. '\n', table.concat(lines, '\n') .. '\n'
  if old ~= new then
    local history = H.history[buf] or {}
    table.insert(history, H.diff(old, new, { ctxlen = 3 }))
    while #history > config.nes_history do
      table.remove(history, 1)
    end
    H.history[buf] = history
  end
  if H.history[buf] == nil or #H.history[buf] == 0 then return end
  H.ask(buf, base, lines)
end

--- Ask for the next edit in the window around the cursor of {buf}, whose lines were {base}
--- before the last changes and are {lines} now.
H.ask = function(buf, base, lines)
  local config, main = H.config(), require('agi').config
  local cursor = vim.api.nvim_win_get_cursor(0)
  local row, size = cursor[1] - 1, config.nes_window
  local first = math.max(0, row - math.floor(size / 2))
  local last = math.min(#lines, first + size)
  first = math.max(0, last - size)
  H.cancel(buf)
  H.next_id = H.next_id + 1
  local id = H.next_id
  H.flights[id] = { buf = buf, tick = vim.api.nvim_buf_get_changedtick(buf) }
  H.pending[buf] = id
  local name = vim.api.nvim_buf_get_name(buf)
  local payload = {
    id = id,
    buf = buf,
    filename = name == '' and 'untitled' or vim.fn.fnamemodify(name, ':~:.'),
    filetype = vim.bo[buf].filetype,
    first = first,
    window = vim.list_slice(lines, first + 1, last),
    original = vim.list_slice(base, first + 1, math.min(#base, last)),
    cursor = { row, cursor[2] },
    history = H.history[buf],
    options = {
      model = config.nes_model or config.model or main.model,
      base_url = config.nes_base_url or config.base_url or main.base_url,
      format = config.nes_format,
    },
  }
  H.set_status('agi: next edit…')
  local ok, err = pcall(vim.fn.AgiHostNes, payload)
  if not ok then M._event(id, { type = 'error', message = 'cannot reach the Python host: ' .. tostring(err) }) end
end

--- The request of {buf} in flight is cancelled: at once here, on the host a moment later.
H.cancel = function(buf)
  local id = H.pending[buf]
  if id == nil then return end
  H.pending[buf], H.flights[id] = nil, nil
  H.clear_status()
  vim.schedule(function() pcall(vim.fn.AgiHostNesCancel, buf, id) end)
end

-- Hunks ----------------------------------------------------------------------
--- Show {hunks} (`{start, count, lines, at}`, rows 0-based) in {buf}, replacing what was shown.
H.show = function(buf, hunks)
  H.clear(buf)
  local shown, count = {}, vim.api.nvim_buf_line_count(buf)
  for _, h in ipairs(hunks) do
    local first, last = h.start, h.start + h.count - 1
    if first >= 0 and last < count and h.count > 0 then
      local old = vim.api.nvim_buf_get_lines(buf, first, last + 1, true)
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
      H.decorate(buf, item, first, last)
      table.insert(shown, item)
    end
  end
  if #shown == 0 then return end
  H.shown[buf] = shown
  H.hint(buf)
end

H.decorate = function(buf, item, first, last)
  if #item.lines == 0 then return end
  local virt = require('agi.preview').virt_lines(buf, item.lines, 'AgiNesAdd')
  local above = item.at == 'above'
  local row = above and first or last
  table.insert(item.marks, vim.api.nvim_buf_set_extmark(buf, M.ns, row, 0, { virt_lines = virt, virt_lines_above = above }))
end

--- A hunk out of view is named at the end of the cursor line.
H.hint = function(buf)
  if buf ~= vim.api.nvim_get_current_buf() then return end
  local top, bottom = vim.fn.line('w0') - 1, vim.fn.line('w$') - 1
  local away = {}
  for _, item in ipairs(H.live(buf)) do
    if item.last < top or item.first > bottom then table.insert(away, tostring(item.first + 1)) end
  end
  if #away == 0 then return end
  local text = string.format(' agi: next edit at line%s %s', #away == 1 and '' or 's', table.concat(away, ', '))
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  H.hint_mark = vim.api.nvim_buf_set_extmark(buf, M.ns, row, 0, { virt_text = { { text, 'AgiNesHint' } }, virt_text_pos = 'eol' })
end

--- The hunks shown in {buf} that still apply, top down, each with its rows now; the others
--- are dropped.
H.live = function(buf)
  local out = {}
  for _, item in ipairs(H.shown[buf] or {}) do
    local mark = vim.api.nvim_buf_get_extmark_by_id(buf, M.ns, item.mark, { details = true })
    local first = mark[1]
    local last = first and (mark[3].end_row or first)
    if first ~= nil and vim.deep_equal(vim.api.nvim_buf_get_lines(buf, first, last + 1, false), item.old) then
      item.first, item.last = first, last
      table.insert(out, item)
    else
      H.unmark(buf, item)
    end
  end
  table.sort(out, function(a, b) return a.first < b.first end)
  H.shown[buf] = #out > 0 and out or nil
  if #out == 0 then H.clear(buf) end
  return out
end

H.drop_stale = function()
  H.check_soon = false
  for buf in pairs(H.shown) do
    if vim.api.nvim_buf_is_valid(buf) then H.live(buf) end
  end
end

--- Apply {item} (its rows now in first/last); {undo_break}: as its own undo step.
H.apply = function(buf, item, undo_break)
  local from, to = item.first, item.last + 1
  if item.at == 'below' then
    from = to
  elseif item.at == 'above' then
    to = from
  end
  local ok = pcall(vim.api.nvim_buf_call, buf, function()
    if undo_break then vim.go.undolevels = vim.go.undolevels end -- an undo break
    vim.api.nvim_buf_set_lines(buf, from, to, true, item.lines)
  end)
  H.unmark(buf, item)
  for i, other in ipairs(H.shown[buf] or {}) do
    if other == item then table.remove(H.shown[buf], i) end
  end
  if ok then H.own[buf] = vim.api.nvim_buf_get_changedtick(buf) end
  if H.shown[buf] ~= nil and #H.shown[buf] == 0 then H.clear(buf) end
  return ok
end

H.unmark = function(buf, item)
  if not vim.api.nvim_buf_is_valid(buf) then return end
  pcall(vim.api.nvim_buf_del_extmark, buf, M.ns, item.mark)
  for _, mark in ipairs(item.marks) do
    pcall(vim.api.nvim_buf_del_extmark, buf, M.ns, mark)
  end
end

H.clear = function(buf)
  H.shown[buf] = nil
  H.hint_mark = nil
  if vim.api.nvim_buf_is_valid(buf) then vim.api.nvim_buf_clear_namespace(buf, M.ns, 0, -1) end
end

-- Status ---------------------------------------------------------------------
--- g:agi_status shows a request in flight and a failure, never messages: typing on must stay quiet.
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
