--- `apply = "review"`: a proposal shown as hunks over its range (|vim.diff()| of the range's
--- lines and the proposal), each taken or dropped on its own. Used by lua/agi/request.lua.
---
--- Each hunk's old lines are tracked by an extmark, so edits elsewhere in the buffer (and the
--- hunks decided before it) never move it to the wrong lines; a hunk that only adds lines is
--- tracked by the unchanged line it follows (or, at the top of the range, precedes). A hunk is
--- applied only if its tracked lines still read as when the proposal came: the range-was-edited
--- rule, per hunk.

local R, H = {}, {}

R.ns = vim.api.nvim_create_namespace('agi-review')

--- What lua/agi/request.lua lends: range(req), retrack(req, first, last), finish(req, status,
--- message), notify(msg, level), mappings().
R.host = nil

H.reviews = {} -- by request id
H.saved = {} -- per buffer: the buffer-local mappings ]h / [h replaced while reviewing

--- Show {req}'s proposal {new} for rows {first}-{last} (0-based) of its buffer as hunks.
---@return integer The number of hunks (0: the proposal changes nothing; nothing is shown)
R.start = function(req, first, last, new)
  local old, buf = req.lines, req.buf
  local join = function(lines) return table.concat(lines, '\n') .. '\n' end
  local diff = vim.diff(join(old), join(new), { result_type = 'indices', algorithm = 'histogram' })
  if #diff == 0 then return 0 end
  local rv = { req = req, buf = buf, hunks = {}, accepted = 0, conflicts = 0 }
  for i, d in ipairs(diff) do
    local sa, ca, sb, cb = d[1], d[2], d[3], d[4]
    local h = { index = i, new = vim.list_slice(new, sb, sb + cb - 1) }
    if ca > 0 then
      h.old, h.first, h.last = vim.list_slice(old, sa, sa + ca - 1), first + sa - 1, first + sa + ca - 2
    elseif sa > 0 then -- lines added after old line sa
      h.old, h.first, h.last, h.after = { old[sa] }, first + sa - 1, first + sa - 1, true
    else -- lines added above the range's first line
      h.old, h.first, h.last, h.before = { old[1] }, first, first, true
    end
    h.mark = vim.api.nvim_buf_set_extmark(buf, R.ns, h.first, 0, {
      end_row = h.last,
      end_col = #vim.api.nvim_buf_get_lines(buf, h.last, h.last + 1, true)[1],
      right_gravity = true,
      end_right_gravity = false,
    })
    table.insert(rv.hunks, h)
  end
  for _, h in ipairs(rv.hunks) do
    H.show(rv, h)
  end
  H.reviews[req.id] = rv
  H.map(buf)
  return #rv.hunks
end

--- Whether {req}'s proposal is being reviewed.
R.active = function(req) return H.reviews[req.id] ~= nil end

--- Whether buffer {buf} has a review in progress.
R.has = function(buf)
  for _, rv in pairs(H.reviews) do
    if rv.buf == buf then return true end
  end
  return false
end

--- Take ({accept}) or drop the hunk under the cursor of buffer {buf}, or with {all} every hunk
--- left of the review at the cursor (else the latest), as one undo step.
---@return boolean, string|nil Whether a hunk was decided, and why not
R.decide = function(buf, accept, all)
  local rv, h = H.at_cursor(buf)
  if all then
    rv = rv or H.latest(buf)
    if rv == nil then return false, 'no change to review in this buffer' end
    return H.decide_all(rv, accept)
  end
  if h == nil then
    local keys = R.host.mappings()
    return false, string.format('no hunk under the cursor (%s / %s move between hunks)', keys.next_hunk, keys.prev_hunk)
  end
  local why = H.decide(rv, h, accept, true)
  H.settle(rv, { why })
  return true
end

--- End {req}'s review: the hunks left are dropped (a new proposal replaces it, or the buffer
--- goes away). Returns 'partly' when some hunk was taken, else 'shown'.
---@return string
R.stop = function(req)
  local rv = H.reviews[req.id]
  if rv == nil then return 'shown' end
  for _, h in ipairs(rv.hunks) do
    if h.state == nil then H.close(rv, h, 'rejected') end
  end
  H.settle(rv, {})
  return rv.accepted > 0 and 'partly' or 'shown'
end

--- Move the cursor to the next ({direction} 1) or previous (-1) hunk of the current buffer,
--- wrapping around.
R.jump = function(direction)
  local buf = vim.api.nvim_get_current_buf()
  local row, rows = vim.api.nvim_win_get_cursor(0)[1] - 1, {}
  for _, rv in pairs(H.reviews) do
    for _, h in ipairs(rv.buf == buf and rv.hunks or {}) do
      local first = h.state == nil and H.rows(rv, h) or nil
      if first ~= nil then table.insert(rows, first) end
    end
  end
  if #rows == 0 then return end
  table.sort(rows)
  local target = direction > 0 and rows[1] or rows[#rows]
  for i = 1, #rows do
    local r = direction > 0 and rows[i] or rows[#rows + 1 - i]
    if (direction > 0 and r > row) or (direction < 0 and r < row) then
      target = r
      break
    end
  end
  vim.api.nvim_win_set_cursor(0, { target + 1, 0 })
end

-- Helpers ---------------------------------------------------------------------
--- A hunk's tracked rows (0-based, inclusive) and their lines now.
H.rows = function(rv, h)
  if not vim.api.nvim_buf_is_valid(rv.buf) then return nil end
  local mark = vim.api.nvim_buf_get_extmark_by_id(rv.buf, R.ns, h.mark, { details = true })
  if mark[1] == nil then return nil end
  local first, last = mark[1], mark[3].end_row or mark[1]
  return first, last, vim.api.nvim_buf_get_lines(rv.buf, first, last + 1, false)
end

H.show = function(rv, h)
  local buf, shown = rv.buf, {}
  local set = function(row, opts) table.insert(shown, vim.api.nvim_buf_set_extmark(buf, R.ns, row, 0, opts)) end
  if not (h.after or h.before) then
    for row = h.first, h.last do
      set(row, { line_hl_group = 'AgiDelete' })
    end
  end
  local label = string.format(' agi hunk %d/%d', h.index, #rv.hunks)
  if #h.new > 0 then
    local virt = require('agi.preview').virt_lines(buf, h.new, 'AgiAdd')
    set(h.before and h.first or h.last, { virt_lines = virt, virt_lines_above = h.before })
  else
    label = label .. ' (deletes these lines)'
  end
  set(h.first, { virt_text = { { label, 'AgiHint' } }, virt_text_pos = 'eol' })
  h.shown = shown
end

H.close = function(rv, h, state)
  h.state = state
  for _, mark in ipairs(h.shown or {}) do
    pcall(vim.api.nvim_buf_del_extmark, rv.buf, R.ns, mark)
  end
  pcall(vim.api.nvim_buf_del_extmark, rv.buf, R.ns, h.mark)
  h.shown = nil
end

--- Take or drop one hunk; returns why it could not be taken, if so.
H.decide = function(rv, h, accept, undo_break)
  if not accept then return H.close(rv, h, 'rejected') end
  local first, last, lines = H.rows(rv, h)
  if first == nil or not vim.deep_equal(lines, h.old) then
    rv.conflicts = rv.conflicts + 1
    H.close(rv, h, 'conflict')
    if first == nil then return 'not applied: the lines of a hunk are gone' end
    return string.format('not applied: lines %d-%d were edited since the proposal came', first + 1, last + 1)
  end
  local _, range_first, range_last = R.host.range(rv.req)
  local from, to = first, last + 1 -- the rows replaced
  if h.after then
    from, to = last + 1, last + 1
  elseif h.before then
    from, to = first, first
  end
  local ok, err = pcall(vim.api.nvim_buf_call, rv.buf, function()
    if undo_break then vim.go.undolevels = vim.go.undolevels end -- its own undo step
    vim.api.nvim_buf_set_lines(rv.buf, from, to, true, h.new)
  end)
  H.close(rv, h, ok and 'accepted' or 'conflict')
  if not ok then return 'not applied: ' .. tostring(err) end
  rv.accepted = rv.accepted + 1
  if range_first ~= nil then R.host.retrack(rv.req, range_first, range_last + #h.new - (to - from)) end
end

--- Every hunk left, bottom up (rows above stay put), in one undo step.
H.decide_all = function(rv, accept)
  local left = {}
  for _, h in ipairs(rv.hunks) do
    if h.state == nil then table.insert(left, { h = h, row = H.rows(rv, h) or -1 }) end
  end
  table.sort(left, function(a, b) return a.row > b.row end)
  local why = {}
  for i, item in ipairs(left) do
    local text = H.decide(rv, item.h, accept, i == 1)
    if text then table.insert(why, text) end
  end
  H.settle(rv, why)
  return true
end

--- When no hunk is left: AgiDone (done when any hunk was taken, else rejected), then the
--- messages of the hunks that could not be taken.
H.settle = function(rv, why)
  local left = 0
  for _, h in ipairs(rv.hunks) do
    left = left + (h.state == nil and 1 or 0)
  end
  if left == 0 and H.reviews[rv.req.id] == rv then
    H.reviews[rv.req.id] = nil
    H.unmap(rv.buf)
    local total = #rv.hunks
    rv.req.outcome = rv.accepted == total and 'applied' or rv.accepted > 0 and 'partly' or 'dropped'
    local status = rv.accepted > 0 and 'done' or 'rejected'
    local message = string.format('%d of %d hunks applied', rv.accepted, total)
    if rv.conflicts > 0 then message = message .. string.format(' (%d edited meanwhile)', rv.conflicts) end
    R.host.finish(rv.req, status, message)
  end
  for _, text in ipairs(why) do
    if text then R.host.notify(text, 'WARN') end
  end
end

--- The review and hunk whose tracked rows hold the cursor, if the buffer is the current one.
H.at_cursor = function(buf)
  if vim.api.nvim_get_current_buf() ~= buf then return nil end
  local row = vim.api.nvim_win_get_cursor(0)[1] - 1
  for _, rv in pairs(H.reviews) do
    for _, h in ipairs(rv.buf == buf and rv.hunks or {}) do
      local first, last = nil, nil
      if h.state == nil then
        first, last = H.rows(rv, h)
      end
      if first ~= nil and first <= row and row <= last then return rv, h end
    end
  end
  return nil
end

H.latest = function(buf)
  local latest
  for _, rv in pairs(H.reviews) do
    if rv.buf == buf and (latest == nil or rv.req.id > latest.req.id) then latest = rv end
  end
  return latest
end

-- Buffer-local ]h / [h while the buffer has a review; a buffer-local mapping they replace
-- comes back afterwards.
H.map = function(buf)
  if H.saved[buf] ~= nil then return end
  local keys, saved = R.host.mappings(), {}
  for name, direction in pairs({ next_hunk = 1, prev_hunk = -1 }) do
    local lhs = keys[name]
    if type(lhs) == 'string' and lhs ~= '' then
      vim.api.nvim_buf_call(buf, function()
        local before = vim.fn.maparg(lhs, 'n', false, true)
        saved[lhs] = (before.buffer == 1) and before or false
        vim.keymap.set('n', lhs, function() R.jump(direction) end, {
          buffer = buf,
          desc = 'agi: ' .. (direction > 0 and 'next' or 'previous') .. ' hunk',
        })
      end)
    end
  end
  H.saved[buf] = saved
end

H.unmap = function(buf)
  if R.has(buf) or H.saved[buf] == nil then return end
  local saved = H.saved[buf]
  H.saved[buf] = nil
  if not vim.api.nvim_buf_is_valid(buf) then return end
  for lhs, before in pairs(saved) do
    pcall(vim.keymap.del, 'n', lhs, { buffer = buf })
    if before then vim.api.nvim_buf_call(buf, function() vim.fn.mapset('n', false, before) end) end
  end
end

return R
