--- *agi.nes* Next-edit suggestions: after a change, the edit that most likely comes next.
---
--- Off by default (`suggest.nes`, |:AgiNes|). The keystroke path only restarts a timer and, when
--- a request is in flight, schedules its cancel (|vim.schedule()|): it never calls the Python
--- host. After `suggest.nes_delay` ms without a change, the changes since the last request go
--- into the history as unified diffs and the host is asked, with the window of the buffer around
--- the cursor, for that window rewritten (agi.frontends.nvim.nes); its answer comes back as hunks,
--- shown where they apply (lua/agi/hunks.lua), with a sign, and named at the end of the cursor
--- line when they are out of view. Asking and placing wait while keys are typed ahead, so no key
--- waits for them. A hunk whose lines changed since is dropped. See |agi-nes|.
--- Its options are the `suggest` table's `nes*` fields (lua/agi/suggest.lua).

local M, H = {}, {}
local Around, Hunks, U = require('agi.around'), require('agi.hunks'), require('agi.util')

M.ns = Hunks.ns

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

-- Called from the Python host (agi.frontends.nvim.nes) through nvim_exec_lua. The hunks are
-- placed once no key waits: a key typed meanwhile goes first and, as a change, drops them.
M._event = function(id, event)
  local s = H.flights[id]
  if s == nil then return end -- cancelled: a change came first
  s.answered = true -- nothing left to cancel on the host
  if event.type == 'error' then
    H.finish(id)
    return H.status.set('agi: next edit failed: ' .. vim.split(tostring(event.message), '\n')[1])
  end
  H.when_idle(id, function() H.show(id, s, type(event.hunks) == 'table' and event.hunks or {}) end)
end

-- Helper data ================================================================
H.active = false
H.base = {} -- by buffer: its lines when the last changes were recorded
H.history = {} -- by buffer: the recent changes, unified diffs, oldest first
H.pending = {} -- by buffer: the id of the request in flight
H.flights = {} -- by id: what a request was asked from
H.shown = {} -- by buffer: the hunks shown
H.hints = {} -- by buffer: the mark naming the hunks out of view, its row and text
H.own = {} -- by buffer: the changedtick after agi applied a hunk (no request for that change)
H.next_id = 0
H.status = U.status() -- a request in flight, a failure: for statuslines
H.diff = vim.text and vim.text.diff or vim.diff

-- Helper functionality =======================================================
H.config = function() return require('agi.suggest').config end

H.activate = function()
  H.active = true
  H.timer = H.timer or vim.uv.new_timer()
  Hunks.highlight()
  local group = vim.api.nvim_create_augroup('agi-nes', { clear = true })
  local au = function(events, callback) vim.api.nvim_create_autocmd(events, { group = group, callback = callback }) end
  au({ 'TextChanged', 'TextChangedI', 'TextChangedP' }, H.on_change)
  au({ 'BufReadPost', 'BufEnter' }, function(ev) H.snapshot(ev.buf, false) end)
  au('BufUnload', function(ev) H.forget(ev.buf) end)
  au('ColorScheme', Hunks.highlight)
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
  H.shown[buf], H.base[buf], H.history[buf], H.own[buf], H.hints[buf] = nil, nil, nil, nil, nil
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
  if vim.fn.getchar(1) ~= 0 then return H.timer:start(config.nes_delay, 0, H.fire_soon) end -- typing on
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
  H.when_idle(id, function(s)
    s.sent = true
    H.status.set('agi: next edit…')
    local ok, err = pcall(vim.fn.AgiHostNes, payload)
    if not ok then M._event(id, { type = 'error', message = 'cannot reach the Python host: ' .. tostring(err) }) end
  end)
end

--- Call {fn} with request {id}'s flight once no key is waiting (|getchar()| peeks): keys typed
--- ahead go first, let in by a timer's turn (|vim.schedule()| would run first), and a change
--- among them cancels the request and {fn} with it.
H.when_idle = function(id, fn, wait)
  local s = H.flights[id]
  if s == nil then return end
  if vim.fn.getchar(1) ~= 0 then
    wait = math.min(2 * (wait or 0.5), 50) -- 1, 2, 4... ms: a mapping waiting for its next key
    return vim.defer_fn(function() H.when_idle(id, fn, wait) end, wait)
  end
  if not vim.api.nvim_buf_is_valid(s.buf) or vim.api.nvim_buf_get_changedtick(s.buf) ~= s.tick then return H.finish(id) end
  fn(s)
end

--- Request {id} is over (shown, failed or cancelled): no longer in flight, and the hunks of
--- its answer placed so far go unless they are shown for good. Returns its flight.
H.finish = function(id)
  local s = H.flights[id]
  if s == nil then return nil end
  H.flights[id] = nil
  if H.pending[s.buf] == id then H.pending[s.buf] = nil end
  H.status.clear()
  for _, item in ipairs(s.placed or {}) do
    Hunks.unmark(s.buf, item)
  end
  return s
end

--- The request of {buf} in flight is cancelled: at once here, on the host a moment later.
H.cancel = function(buf)
  local id = H.pending[buf]
  if id == nil then return end
  H.pending[buf] = nil
  local s = H.finish(id) or {}
  if s.sent and not s.answered then vim.schedule(function() pcall(vim.fn.AgiHostNesCancel, buf, id) end) end
end

-- Hunks ----------------------------------------------------------------------
--- Show {hunks} (`{start, count, lines, at}`, rows 0-based), request {id}'s answer, in place of
--- what is shown: a hunk shown already stays as it is, the others are placed one at a time, a
--- key waiting going first between two.
H.show = function(id, s, hunks)
  local buf, i, shown = s.buf, 0, {}
  s.kept, s.placed = {}, {}
  for _, item in ipairs(H.live(buf)) do
    shown[Hunks.key(item.first, item.at, item.old, item.lines)] = item
  end
  local function step()
    local count = vim.api.nvim_buf_line_count(buf)
    while i < #hunks do
      i = i + 1
      local h = hunks[i]
      local first, last = h.start, h.start + h.count - 1
      if first >= 0 and last < count and h.count > 0 then
        local old = vim.api.nvim_buf_get_lines(buf, first, last + 1, true)
        local key = Hunks.key(first, h.at, old, h.lines)
        local same = shown[key]
        shown[key] = nil
        table.insert(same and s.kept or s.placed, same or Hunks.place(buf, h, first, last, old))
        if i < #hunks and vim.fn.getchar(1) ~= 0 then return H.when_idle(id, step) end
      end
    end
    H.settle(id, s)
  end
  step()
end

--- Request {id}'s hunks are all in place: those shown before and not kept go.
H.settle = function(id, s)
  local buf, kept = s.buf, {}
  for _, item in ipairs(s.kept) do
    kept[item] = true
  end
  for _, item in ipairs(H.shown[buf] or {}) do
    if not kept[item] then Hunks.unmark(buf, item) end
  end
  local shown = vim.list_extend(s.kept, s.placed)
  s.placed = nil -- shown for good: a cancel no longer takes them
  H.finish(id)
  H.shown[buf] = #shown > 0 and shown or nil
  local current = buf == vim.api.nvim_get_current_buf() -- else no hint: the view is another buffer's
  H.hints[buf] = Hunks.hint(buf, current and H.live(buf) or {}, H.hints[buf])
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
      Hunks.unmark(buf, item)
    end
  end
  table.sort(out, function(a, b) return a.first < b.first end)
  if #out == 0 and H.shown[buf] ~= nil then H.clear(buf) end
  H.shown[buf] = #out > 0 and out or nil
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
  Hunks.unmark(buf, item)
  for i, other in ipairs(H.shown[buf] or {}) do
    if other == item then table.remove(H.shown[buf], i) end
  end
  if ok then H.own[buf] = vim.api.nvim_buf_get_changedtick(buf) end
  if H.shown[buf] ~= nil and #H.shown[buf] == 0 then H.clear(buf) end
  return ok
end

H.clear = function(buf)
  H.shown[buf], H.hints[buf] = nil, nil
  if vim.api.nvim_buf_is_valid(buf) then vim.api.nvim_buf_clear_namespace(buf, M.ns, 0, -1) end
end

return M
