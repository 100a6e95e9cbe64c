--- The life of a request: its range tracked, its progress shown (spinner, g:agi_status, the
--- streamed proposal), its result applied, previewed or reviewed, and `User AgiDone` fired
--- exactly once. Used by lua/agi/init.lua, which validates the commands' input.

local M, H = {}, {}
local Preview, Review, Range = require('agi.preview'), require('agi.review'), require('agi.range')
local Progress, U = require('agi.progress'), require('agi.util')

--- Send a request for lines {first}-{last} (1-based) of {buf} to the Python host.
---@return integer The request id
M.start = function(...) return H.start(...) end

--- An event from the Python host (agi.frontends.nvim.plugin): started, progress, notice, and the one
--- that ends the request (done, cancelled, error).
M.event = function(id, event)
  local req = H.requests[id]
  if event.type == 'started' then
    H.logs[id] = H.logs[id] or {} -- a request cancelled first has its summary already
    H.logs[id].path = event.log
    if req ~= nil then req.session = event.session end
  end
  if req == nil then return end
  if event.usage ~= nil and event.usage ~= vim.NIL then req.usage = Progress.usage(event.usage) end
  if event.type == 'progress' then
    req.phase, req.chars = event.phase, event.chars
    local _, last = H.rows(req)
    if req.stream and last ~= nil and type(event.ops) == 'table' and #event.ops > 0 then
      Preview.stream(req, event.ops, last)
    end
  elseif event.type == 'notice' then
    H.notify(event.message, 'WARN')
  elseif event.type == 'done' then
    H.on_result(req, event.lines)
  elseif event.type == 'cancelled' then
    H.finish(req, 'cancelled', 'cancelled')
  elseif event.type == 'error' then
    H.finish(req, 'error', event.message, 'ERROR')
  end
end

--- Cancel the running requests of {buf}; returns how many.
M.cancel = function(buf)
  local ids = {}
  for id, req in pairs(H.requests) do
    if req.buf == buf then table.insert(ids, id) end
  end
  if #ids == 0 then return 0 end
  pcall(vim.fn.AgiHostCancel, ids)
  for _, id in ipairs(ids) do
    H.finish(H.requests[id], 'cancelled', 'cancelled')
  end
  return #ids
end

--- Ask again for {buf}'s last request with {instruction}, in its session.
---@return integer|nil, string|nil The request id, or why there is none
M.refine = function(buf, instruction)
  local prev = H.last[buf]
  if prev == nil then return nil, 'no request to refine in this buffer' end
  if H.requests[prev.id] == prev then return nil, 'the last request is still running (:AgiCancel stops it)' end
  if prev.session == nil then return nil, 'nothing to refine: the last request never got to the model' end
  local lines, first, last = H.range(prev)
  if lines == nil then return nil, 'nothing to refine: the lines of the last request are gone' end
  local state = prev.outcome or 'dropped'
  if H.previews[prev.id] == prev then
    state = 'shown'
    Preview.hide(prev)
    H.previews[prev.id] = nil
  elseif Review.active(prev) then
    state = Review.stop(prev) -- its AgiDone fires: the hunks left are dropped
  end
  return H.start(prev.kind, buf, first + 1, last + 1, instruction, { session = prev.session, refine = state })
end

--- :AgiAccept / :AgiReject in {buf}.
M.decide = function(buf, accept, all) H.decide(buf, accept, all) end

--- A buffer went away: its requests are cancelled, its review ends.
M.unload = function(buf)
  for _, req in pairs(H.requests) do
    if req.buf == buf then
      pcall(vim.fn.AgiHostCancel, { req.id })
      H.finish(req, 'cancelled', 'the buffer was unloaded')
    end
  end
  local last = H.last[buf]
  if last ~= nil and Review.active(last) then Review.stop(last) end
  H.last[buf] = nil
end

--- The log entry of the latest request that has one: `{path, summary}` (a copy).
M.latest_log = function()
  local latest
  for id, entry in pairs(H.logs) do
    if entry.path ~= nil and (latest == nil or id > latest) then latest = id end
  end
  return latest and { path = H.logs[latest].path, summary = H.logs[latest].summary }
end

--- What is known of {buf}'s last request: `{session, running}` (a copy), or nil.
M.last_of = function(buf)
  local req = H.last[buf]
  if req == nil then return nil end
  return { session = req.session, running = H.requests[req.id] == req }
end

-- Helpers ----------------------------------------------------------------------
H.ns = vim.api.nvim_create_namespace('agi')
H.requests = {} -- running, by id
H.previews = {} -- finished and waiting for :AgiAccept / :AgiReject, by id
H.last = {} -- the last request of each buffer, for :AgiRefine (its range stays tracked)
H.logs = {} -- of each request, by id: its trace file and how it ended
H.next_id = 0

H.config = function() return require('agi').config end

H.notify = U.notify

H.start = function(kind, buf, first, last, instruction, extra)
  extra = extra or {}
  local config = H.config()
  local count = vim.api.nvim_buf_line_count(buf)
  first, last = math.max(1, math.min(first, last)), math.min(count, math.max(first, last))
  local lines = vim.api.nvim_buf_get_lines(buf, first - 1, last, true)
  local context = config.context
  H.next_id = H.next_id + 1
  local req = {
    id = H.next_id,
    kind = kind,
    buf = buf,
    lines = lines,
    tick = vim.api.nvim_buf_get_changedtick(buf),
    mark = H.track(buf, first - 1, last - 1),
    started = vim.uv.hrtime(),
    phase = 'starting',
    chars = 0,
    apply = config.apply,
    stream = config.stream,
  }
  H.requests[req.id] = req
  H.set_last(buf, req)
  local name = vim.api.nvim_buf_get_name(buf)
  local payload = {
    id = req.id,
    kind = kind,
    instruction = instruction,
    lines = lines,
    first = first,
    before = vim.api.nvim_buf_get_lines(buf, math.max(0, first - 1 - context), first - 1, true),
    after = vim.api.nvim_buf_get_lines(buf, last, math.min(count, last + context), true),
    filetype = vim.bo[buf].filetype,
    filename = name == '' and '[No Name]' or vim.fn.fnamemodify(name, ':~:.'),
    leaders = Range.comment_leaders(buf),
    diagnostics = H.diagnostics(buf, first - 1, last - 1),
    indent = {
      expandtab = vim.bo[buf].expandtab,
      shiftwidth = vim.bo[buf].shiftwidth > 0 and vim.bo[buf].shiftwidth or vim.bo[buf].tabstop,
      tabstop = vim.bo[buf].tabstop,
    },
    cwd = vim.fn.getcwd(),
    session = extra.session,
    refine = extra.refine,
    options = {
      model = config.model,
      base_url = config.base_url,
      sys = config.sys,
      tools = config.tools,
      react = config.react,
    },
  }
  H.spin()
  local ok, err = pcall(vim.fn.AgiHostRequest, payload)
  if not ok then H.finish(req, 'error', H.host_failure(tostring(err)), 'ERROR') end
  return req.id
end

--- The diagnostics of {buf} (|vim.diagnostic.get()|) on rows {first}-{last} (0-based) or within
--- H.near rows of them, for the model: `{severity, line (1-based), message, source}`.
H.diagnostics = function(buf, first, last)
  local out = {}
  for _, d in ipairs(vim.diagnostic.get(buf)) do
    if d.lnum >= first - H.near and d.lnum <= last + H.near then
      table.insert(out, {
        severity = vim.diagnostic.severity[d.severity] or 'ERROR',
        line = d.lnum + 1,
        message = d.message,
        source = d.source,
      })
    end
  end
  table.sort(out, function(a, b) return a.line < b.line end)
  return out
end

H.near = 3 -- rows around a range whose diagnostics go with it

H.host_failure = function(err)
  if err:find('Failed to load python3 host') then
    return 'the Python host failed to start; see :checkhealth agi and :messages'
  elseif err:find('E117') then
    return 'agi is not registered with the Python host: run :UpdateRemotePlugins and restart (:checkhealth agi)'
  end
  return 'cannot reach the Python host: ' .. err .. ' (see :checkhealth agi)'
end

--- An extmark over rows {first}-{last} (0-based) that follows them as lines move; inserting
--- right above or below does not grow it. {id}: move that mark instead.
H.track = function(buf, first, last, id)
  return vim.api.nvim_buf_set_extmark(buf, H.ns, first, 0, {
    id = id,
    end_row = last,
    end_col = #vim.api.nvim_buf_get_lines(buf, last, last + 1, true)[1],
    right_gravity = true,
    end_right_gravity = false,
  })
end

--- {req}'s range is rows {first}-{last} now (after agi changed them).
H.retrack = function(req, first, last)
  if last < first then return H.untrack(req) end
  req.mark = H.track(req.buf, first, last, req.mark)
end

H.untrack = function(req)
  if req.mark ~= nil and vim.api.nvim_buf_is_valid(req.buf) then
    pcall(vim.api.nvim_buf_del_extmark, req.buf, H.ns, req.mark)
  end
  req.mark = nil
end

--- The range's rows (0-based, inclusive), wherever edits moved it.
H.rows = function(req)
  if req.mark == nil or not vim.api.nvim_buf_is_valid(req.buf) then return nil end
  local mark = vim.api.nvim_buf_get_extmark_by_id(req.buf, H.ns, req.mark, { details = true })
  if mark[1] == nil then return nil end
  return mark[1], mark[3].end_row or mark[1]
end

--- The range's current lines and rows (0-based, inclusive).
H.range = function(req)
  local first, last = H.rows(req)
  if first == nil then return nil end
  return vim.api.nvim_buf_get_lines(req.buf, first, last + 1, false), first, last
end

--- The buffer's last request is {req}; the one before keeps its range only while it is shown.
H.set_last = function(buf, req)
  local old = H.last[buf]
  H.last[buf] = req
  if old ~= nil and old ~= req and not H.active(old) then H.untrack(old) end
end

H.active = function(req) return H.requests[req.id] == req or H.previews[req.id] == req or Review.active(req) end

H.on_result = function(req, lines)
  Preview.clear_stream(req)
  local current, first, last = H.range(req)
  if current == nil then return H.finish(req, 'cancelled', 'the buffer is gone') end
  if not vim.deep_equal(current, req.lines) then return H.finish(req, 'conflict', H.conflict(first, last), 'WARN') end
  req.result = lines
  if req.apply == 'preview' then
    Preview.show(req, first, last)
    return H.finish(req, 'preview', 'preview shown: :AgiAccept applies it, :AgiReject drops it')
  elseif req.apply == 'review' then
    H.stop(req) -- AgiDone waits for the last hunk
    local hunks = Review.start(req, first, last, lines)
    if hunks == 0 then return H.finish(req, 'done', 'the proposal changes nothing') end
    local keys = H.config().mappings
    local how = ':AgiAccept / :AgiReject take or drop the hunk under the cursor (! for all)'
    if keys.next_hunk ~= '' then how = how .. ', ' .. keys.next_hunk .. ' / ' .. keys.prev_hunk .. ' move' end
    return H.notify(string.format('%d hunk%s to review: %s', hunks, hunks == 1 and '' or 's', how), 'INFO')
  end
  local applied, why = H.apply(req, lines)
  if not applied then return H.finish(req, 'conflict', why, 'WARN') end
  H.finish(req, 'done', string.format('replaced lines %d-%d', first + 1, last + 1))
end

H.conflict = function(first, last)
  return string.format(
    'not applied: lines %d-%d were edited while the model worked (its reply is in :AgiLog)',
    first + 1,
    last + 1
  )
end

--- Replace the range with {lines} in one undo step, if it still holds the snapshot; the range
--- then covers the new lines (for :AgiRefine).
H.apply = function(req, lines)
  local current, first, last = H.range(req)
  if current == nil then return false, 'not applied: the buffer is gone' end
  if not vim.deep_equal(current, req.lines) then return false, H.conflict(first, last) end
  local ok, err = pcall(vim.api.nvim_buf_call, req.buf, function()
    vim.go.undolevels = vim.go.undolevels -- an undo break: the change is its own undo step
    vim.api.nvim_buf_set_lines(req.buf, first, last + 1, true, lines)
  end)
  if not ok then return false, 'not applied: ' .. tostring(err) end
  req.outcome = 'applied'
  H.retrack(req, first, first + #lines - 1)
  return true
end

--- :AgiAccept / :AgiReject: a hunk when reviewing, else a preview.
H.decide = function(buf, accept, all)
  local word = accept and 'accept' or 'reject'
  local req = H.pick_preview(buf)
  if Review.has(buf) and (all or req == nil or not H.at(req)) then
    local ok, why = Review.decide(buf, accept, all)
    if not ok then H.notify(why, 'WARN') end
    return
  end
  if req == nil then return H.notify('no change to ' .. word .. ' in this buffer', 'WARN') end
  Preview.hide(req)
  H.previews[req.id] = nil
  local applied, why = true, nil
  if accept then applied, why = H.apply(req, req.result) end
  if not applied then H.notify(why, 'WARN') end
  if not (accept and applied) then H.forget(req) end
end

--- Stop a request running (no more progress; the spinner goes; g:agi_status shows its usage).
H.stop = function(req)
  if H.requests[req.id] ~= req then return end
  H.requests[req.id] = nil
  if vim.api.nvim_buf_is_valid(req.buf) and req.spinner then
    pcall(vim.api.nvim_buf_del_extmark, req.buf, H.ns, req.spinner)
  end
  Preview.clear_stream(req)
  Progress.stopped(req.usage or Progress.usage({}))
  H.spin()
end

--- End a request: AgiDone first, then (if any) the message to the user.
H.finish = function(req, status, message, level)
  if req == nil or req.ended then return end
  req.ended = true
  H.stop(req)
  if status == 'preview' then
    H.previews[req.id] = req
  elseif status ~= 'done' then
    H.forget(req)
  end
  local usage = req.usage or Progress.usage({})
  local log = H.logs[req.id] or {}
  H.logs[req.id] = log
  log.summary = string.format('agi %s: %s · %s', req.kind, status, Progress.describe(usage))
  local data = {
    status = status,
    buf = req.buf,
    message = message,
    id = req.id,
    log = log.path,
    usage = { input = usage.input, output = usage.output, cost = usage.cost },
  }
  vim.api.nvim_exec_autocmds('User', { pattern = 'AgiDone', modeline = false, data = data })
  if level ~= nil then H.notify(message, level) end
end

--- Nothing of {req} is shown any more; its range stays tracked while it is its buffer's last.
H.forget = function(req)
  H.previews[req.id] = nil
  req.outcome = req.outcome or 'dropped'
  if H.last[req.buf] ~= req then H.untrack(req) end
end

--- The buffer's preview whose range holds the cursor, else its latest.
H.pick_preview = function(buf)
  local latest
  for _, req in pairs(H.previews) do
    if req.buf == buf then
      if H.at(req) then return req end
      if latest == nil or req.id > latest.id then latest = req end
    end
  end
  return latest
end

--- Whether the cursor is in {req}'s range.
H.at = function(req)
  if vim.api.nvim_get_current_buf() ~= req.buf then return false end
  local row, first, last = vim.api.nvim_win_get_cursor(0)[1] - 1, H.rows(req)
  return first ~= nil and first <= row and row <= last
end

-- Progress -------------------------------------------------------------------
H.spin = function() Progress.spin({ requests = H.requests, rows = H.rows, ns = H.ns }) end

Review.host = {
  range = H.range,
  retrack = H.retrack,
  finish = function(req, status, message) H.finish(req, status, message) end,
  notify = H.notify,
  mappings = function() return H.config().mappings end,
}

return M
