--- *agi* Refactor a range, implement from a comment; Neovim never waits for the model.
---
--- The commands snapshot the range (its lines, `b:changedtick` and an extmark that follows it
--- as lines move) and hand the request to agi's Python remote plugin, which runs it on a worker
--- thread and reports back through `nvim.async_call`. The result is applied here, with one
--- |nvim_buf_set_lines()| (one undo step), only if the range still holds the snapshot's text.
--- `User AgiDone` fires exactly once per request. See |agi.txt|.

local M, H = {}, {}

--- Module config. Anything left out comes from agi's own configuration (AGI_MODEL,
--- AGI_BASE_URL, config.toml), as for the command line.
M.config = {
  -- `provider:model` or a bare model name; nil: AGI_MODEL or config.toml
  model = nil,
  -- OpenAI-compatible endpoint ending in /v1; nil: AGI_BASE_URL or config.toml
  base_url = nil,
  -- system prompt files, as agi's --sys (`default` is the built-in prompt)
  sys = nil,
  -- false: one model call, no tools; true: agi's configured tools; or a list of tool names
  tools = false,
  -- true: the text ReAct protocol instead of native tool calls, as agi's --react
  react = false,
  -- "direct": apply the result at once; "preview": show it, then :AgiAccept / :AgiReject
  apply = 'direct',
  -- lines of context sent before and after the range
  context = 40,
  -- a spinner with the elapsed time at the range while the model works
  spinner = true,
  -- start the Python host shortly after startup, so no command waits for it
  warmup = true,
}

--- Validate {config}, merge it into the defaults, and apply it. Optional.
---@param config table|nil
M.setup = function(config) M.config = H.setup_config(config) end

--- Rewrite lines {range} (default: the current line) of the current buffer as instructed.
---@param instruction string
---@param range table|nil `{first, last}`, 1-based and inclusive
---@return integer|nil The request id
M.refactor = function(instruction, range)
  if H.is_disabled() then return H.notify('disabled in this buffer (b:agi_disable)', 'WARN') end
  instruction = vim.trim(instruction or '')
  if instruction == '' then
    return H.notify(':AgiRefactor needs an instruction, e.g. :AgiRefactor use a list comprehension', 'ERROR')
  end
  local row = vim.api.nvim_win_get_cursor(0)[1]
  range = range or { row, row }
  return H.start('refactor', vim.api.nvim_get_current_buf(), range[1], range[2], instruction)
end

--- Implement the function described by the comment or signature in {range}. Without a range:
--- the comment block at the cursor (or above the signature at the cursor) with the signature and
--- stub below it.
---@param instruction string|nil
---@param range table|nil `{first, last}`, 1-based and inclusive
---@return integer|nil The request id
M.implement = function(instruction, range)
  if H.is_disabled() then return H.notify('disabled in this buffer (b:agi_disable)', 'WARN') end
  local buf = vim.api.nvim_get_current_buf()
  range = range or H.implement_range(buf, vim.api.nvim_win_get_cursor(0)[1])
  local lines = vim.api.nvim_buf_get_lines(buf, math.min(range[1], range[2]) - 1, math.max(range[1], range[2]), false)
  if vim.trim(table.concat(lines, '')) == '' then
    return H.notify(':AgiImplement needs a comment or a signature to implement, at the cursor or in the range', 'ERROR')
  end
  return H.start('implement', buf, range[1], range[2], vim.trim(instruction or ''))
end

--- Cancel the running requests of buffer {buf} (default: current): the model connection is
--- closed at once and nothing is applied.
---@param buf integer|nil
---@return integer The number of requests cancelled
M.cancel = function(buf)
  buf = H.buf(buf)
  local ids = {}
  for id, req in pairs(H.requests) do
    if req.buf == buf then table.insert(ids, id) end
  end
  if #ids == 0 then
    H.notify('no request is running in this buffer', 'INFO')
    return 0
  end
  pcall(vim.fn.AgiHostCancel, ids)
  for _, id in ipairs(ids) do
    H.finish(H.requests[id], 'cancelled', 'cancelled')
  end
  return #ids
end

--- Apply the previewed change of buffer {buf} at the cursor (or its latest one).
---@param buf integer|nil
M.accept = function(buf)
  local req = H.pick_preview(H.buf(buf))
  if req == nil then return H.notify('no change to accept in this buffer', 'WARN') end
  H.drop_preview(req)
  local applied, why = H.apply(req, req.result)
  if not applied then H.notify(why, 'WARN') end
end

--- Drop the previewed change of buffer {buf} at the cursor (or its latest one).
---@param buf integer|nil
M.reject = function(buf)
  local req = H.pick_preview(H.buf(buf))
  if req == nil then return H.notify('no change to reject in this buffer', 'WARN') end
  H.drop_preview(req)
  H.forget(req)
end

--- Open the log (the session trace) of the last request in a split.
M.log = function()
  local last
  for id, path in pairs(H.logs) do
    if last == nil or id > last then last = id end
  end
  if last == nil then return H.notify('no request has been logged yet', 'WARN') end
  vim.cmd('split ' .. vim.fn.fnameescape(H.logs[last]))
  vim.bo.readonly, vim.bo.bufhidden = true, 'wipe'
end

--- What `g:agi_status` holds, for statuslines: a spinner and the elapsed time, or ''.
---@return string
M.status = function() return vim.g.agi_status or '' end

-- Called from the Python host (agi.nvim.plugin) through nvim_exec_lua.
M._event = function(id, event)
  if event.type == 'started' then H.logs[id] = event.log end
  local req = H.requests[id]
  if req == nil then return end
  if event.type == 'progress' then
    req.phase, req.chars = event.phase, event.chars
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

-- Called from plugin/agi.lua at startup.
M._register = function()
  if H.registered() then return end
  -- Without `:UpdateRemotePlugins` the manifest lacks agi: register it here, which works as
  -- long as the python3 host has not started yet.
  local known, running = pcall(vim.fn['remote#host#IsRunning'], 'python3')
  if not known or running == 1 then return end
  local ok = pcall(vim.fn['remote#host#RegisterPlugin'], 'python3', H.rplugin_path(), H.specs())
  if ok then H.registered_by = 'plugin/agi.lua' end
end

M._warmup = function()
  if not M.config.warmup or vim.g.loaded_python3_provider == 0 or not H.registered() then return end
  if vim.fn['remote#host#IsRunning']('python3') == 1 then return end
  pcall(vim.fn['remote#host#Require'], 'python3')
end

M._registration = function() return H.registered(), H.registered_by end

-- A buffer that goes away takes its requests with it.
vim.api.nvim_create_autocmd('BufUnload', {
  group = vim.api.nvim_create_augroup('agi', {}),
  callback = function(ev)
    for _, req in pairs(H.requests) do
      if req.buf == ev.buf then
        pcall(vim.fn.AgiHostCancel, { req.id })
        H.finish(req, 'cancelled', 'the buffer was unloaded')
      end
    end
  end,
})

-- Helper data ================================================================
H.default_config = vim.deepcopy(M.config)
H.ns = vim.api.nvim_create_namespace('agi')
H.ns_preview = vim.api.nvim_create_namespace('agi-preview')
H.requests = {} -- running, by id
H.previews = {} -- finished and waiting for :AgiAccept / :AgiReject, by id
H.logs = {} -- trace file of each request, by id
H.next_id = 0
H.frames = { '⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏' }
H.root = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h:h')
H.registered_by = 'the remote-plugin manifest'

-- Helper functionality =======================================================
-- Settings -------------------------------------------------------------------
H.setup_config = function(config)
  H.check('config', config, 'table', true)
  config = vim.tbl_deep_extend('force', vim.deepcopy(H.default_config), config or {})
  H.check('config.model', config.model, 'string', true)
  H.check('config.base_url', config.base_url, 'string', true)
  H.check('config.sys', config.sys, 'table', true)
  H.check('config.context', config.context, 'number')
  H.check('config.spinner', config.spinner, 'boolean')
  H.check('config.warmup', config.warmup, 'boolean')
  H.check('config.react', config.react, 'boolean')
  if type(config.tools) ~= 'boolean' and type(config.tools) ~= 'table' then
    H.error('`config.tools` should be a boolean or a list of tool names, not ' .. type(config.tools))
  end
  if config.apply ~= 'direct' and config.apply ~= 'preview' then
    H.error('`config.apply` should be "direct" or "preview", not ' .. vim.inspect(config.apply))
  end
  if config.context < 0 then H.error('`config.context` should be 0 or more, not ' .. config.context) end
  return config
end

H.check = function(name, value, kind, optional)
  if (value == nil and optional) or type(value) == kind then return end
  H.error(string.format('`%s` should be %s, not %s', name, kind, type(value)))
end

H.error = function(msg) error('(agi) ' .. msg, 0) end

H.notify = function(msg, level) vim.notify('(agi) ' .. msg, vim.log.levels[level]) end

H.is_disabled = function() return vim.g.agi_disable == true or vim.b.agi_disable == true end

H.buf = function(buf) return (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf end

-- Requests -------------------------------------------------------------------
H.start = function(kind, buf, first, last, instruction)
  local count = vim.api.nvim_buf_line_count(buf)
  first, last = math.max(1, math.min(first, last)), math.min(count, math.max(first, last))
  local lines = vim.api.nvim_buf_get_lines(buf, first - 1, last, true)
  local context = M.config.context
  H.next_id = H.next_id + 1
  local req = {
    id = H.next_id,
    kind = kind,
    buf = buf,
    lines = lines,
    tick = vim.api.nvim_buf_get_changedtick(buf),
    -- follows the range as lines move; inserting right above or below does not grow it
    mark = vim.api.nvim_buf_set_extmark(buf, H.ns, first - 1, 0, {
      end_row = last - 1,
      end_col = #lines[#lines],
      right_gravity = true,
      end_right_gravity = false,
    }),
    started = vim.uv.hrtime(),
    phase = 'starting',
    chars = 0,
  }
  H.requests[req.id] = req
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
    leaders = H.comment_leaders(buf),
    indent = {
      expandtab = vim.bo[buf].expandtab,
      shiftwidth = vim.bo[buf].shiftwidth > 0 and vim.bo[buf].shiftwidth or vim.bo[buf].tabstop,
      tabstop = vim.bo[buf].tabstop,
    },
    cwd = vim.fn.getcwd(),
    options = {
      model = M.config.model,
      base_url = M.config.base_url,
      sys = M.config.sys,
      tools = M.config.tools,
      react = M.config.react,
    },
  }
  H.spin()
  local ok, err = pcall(vim.fn.AgiHostRequest, payload)
  if not ok then H.finish(req, 'error', H.host_failure(tostring(err)), 'ERROR') end
  return req.id
end

H.host_failure = function(err)
  if err:find('Failed to load python3 host') then
    return 'the Python host failed to start; see :checkhealth agi and :messages'
  elseif err:find('E117') then
    return 'agi is not registered with the Python host: run :UpdateRemotePlugins and restart (:checkhealth agi)'
  end
  return 'cannot reach the Python host: ' .. err .. ' (see :checkhealth agi)'
end

--- The range's current lines and rows (0-based, inclusive), wherever edits moved it.
H.range = function(req)
  if not vim.api.nvim_buf_is_valid(req.buf) then return nil end
  local mark = vim.api.nvim_buf_get_extmark_by_id(req.buf, H.ns, req.mark, { details = true })
  if mark[1] == nil then return nil end
  local first, last = mark[1], mark[3].end_row or mark[1]
  return vim.api.nvim_buf_get_lines(req.buf, first, last + 1, false), first, last
end

H.on_result = function(req, lines)
  local current, first, last = H.range(req)
  if current == nil then return H.finish(req, 'cancelled', 'the buffer is gone') end
  if not vim.deep_equal(current, req.lines) then return H.finish(req, 'conflict', H.conflict(first, last), 'WARN') end
  if M.config.apply == 'preview' then
    req.result = lines
    H.show_preview(req, first, last)
    return H.finish(req, 'preview', 'preview shown: :AgiAccept applies it, :AgiReject drops it')
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

--- Replace the range with {lines} in one undo step, if it still holds the snapshot.
H.apply = function(req, lines)
  local current, first, last = H.range(req)
  if current == nil then return false, 'not applied: the buffer is gone' end
  if not vim.deep_equal(current, req.lines) then return false, H.conflict(first, last) end
  local ok, err = pcall(vim.api.nvim_buf_call, req.buf, function()
    vim.go.undolevels = vim.go.undolevels -- an undo break: the change is its own undo step
    vim.api.nvim_buf_set_lines(req.buf, first, last + 1, true, lines)
  end)
  H.forget(req)
  if not ok then return false, 'not applied: ' .. tostring(err) end
  return true
end

--- End a request: AgiDone first, then (if any) the message to the user.
H.finish = function(req, status, message, level)
  if req == nil or H.requests[req.id] ~= req then return end
  H.requests[req.id] = nil
  if vim.api.nvim_buf_is_valid(req.buf) and req.spinner then
    pcall(vim.api.nvim_buf_del_extmark, req.buf, H.ns, req.spinner)
  end
  if status == 'preview' then
    H.previews[req.id] = req
  elseif status ~= 'done' then
    H.forget(req)
  end
  H.spin()
  local data = { status = status, buf = req.buf, message = message, id = req.id, log = H.logs[req.id] }
  vim.api.nvim_exec_autocmds('User', { pattern = 'AgiDone', modeline = false, data = data })
  if level ~= nil then H.notify(message, level) end
end

H.forget = function(req)
  H.previews[req.id] = nil
  if vim.api.nvim_buf_is_valid(req.buf) then pcall(vim.api.nvim_buf_del_extmark, req.buf, H.ns, req.mark) end
end

-- Preview --------------------------------------------------------------------
H.show_preview = function(req, first, last)
  local buf, marks = req.buf, {}
  for row = first, last do
    table.insert(marks, vim.api.nvim_buf_set_extmark(buf, H.ns_preview, row, 0, { line_hl_group = 'DiffDelete' }))
  end
  local tabstop, virt = vim.bo[buf].tabstop, {}
  for _, line in ipairs(req.result) do
    local shown = line:gsub('\t', string.rep(' ', tabstop))
    table.insert(virt, { { shown, 'DiffAdd' } })
  end
  table.insert(virt, { { 'agi: :AgiAccept applies this change, :AgiReject drops it', 'Comment' } })
  table.insert(marks, vim.api.nvim_buf_set_extmark(buf, H.ns_preview, last, 0, { virt_lines = virt }))
  req.preview_marks = marks
end

H.drop_preview = function(req)
  H.previews[req.id] = nil
  if not vim.api.nvim_buf_is_valid(req.buf) then return end
  for _, mark in ipairs(req.preview_marks or {}) do
    pcall(vim.api.nvim_buf_del_extmark, req.buf, H.ns_preview, mark)
  end
end

--- The buffer's preview whose range holds the cursor, else its latest.
H.pick_preview = function(buf)
  local row, latest = vim.api.nvim_win_get_cursor(0)[1] - 1, nil
  for _, req in pairs(H.previews) do
    if req.buf == buf then
      local _, first, last = H.range(req)
      if first ~= nil and first <= row and row <= last then return req end
      if latest == nil or req.id > latest.id then latest = req end
    end
  end
  return latest
end

-- Progress -------------------------------------------------------------------
H.spin = function()
  local running = next(H.requests) ~= nil
  if running and H.timer == nil then
    H.timer = vim.uv.new_timer()
    H.timer:start(0, 100, vim.schedule_wrap(H.tick))
  elseif not running and H.timer ~= nil then
    H.timer:stop()
    H.timer:close()
    H.timer = nil
    H.tick()
  end
end

H.tick = function()
  local frame = H.frames[math.floor(vim.uv.hrtime() / 1e8) % #H.frames + 1]
  local count, oldest = 0, nil
  for _, req in pairs(H.requests) do
    count = count + 1
    oldest = math.min(oldest or req.started, req.started)
    if M.config.spinner then H.show_spinner(req, frame) end
  end
  local status = ''
  if count > 0 then
    status = string.format('%s agi %.1fs', frame, (vim.uv.hrtime() - oldest) / 1e9)
    if count > 1 then status = status .. string.format(' (%d requests)', count) end
  end
  if vim.g.agi_status ~= status then
    vim.g.agi_status = status
    pcall(vim.cmd.redrawstatus)
  end
end

H.show_spinner = function(req, frame)
  local _, first = H.range(req)
  if first == nil then return end
  local text = string.format(' %s agi %s: %s %.1fs', frame, req.kind, req.phase, (vim.uv.hrtime() - req.started) / 1e9)
  if req.chars > 0 then text = text .. string.format(' · %d chars', req.chars) end
  req.spinner = vim.api.nvim_buf_set_extmark(req.buf, H.ns, first, 0, {
    id = req.spinner,
    virt_text = { { text, 'Comment' } },
    virt_text_pos = 'eol',
    hl_mode = 'combine',
  })
end

-- Implement ------------------------------------------------------------------
--- The comment leaders of the buffer's filetype, from 'commentstring' and 'comments' (leaving
--- out the "f" entries, which are list bullets like "-").
H.comment_leaders = function(buf)
  local leaders, seen = {}, {}
  local add = function(leader)
    leader = vim.trim(leader)
    if leader ~= '' and not seen[leader] then
      seen[leader] = true
      table.insert(leaders, leader)
    end
  end
  add((vim.bo[buf].commentstring or ''):match('^(.-)%%s') or '')
  for _, part in ipairs(vim.split(vim.bo[buf].comments or '', ',', { plain = true })) do
    local flags, leader = part:match('^([^:]*):(.*)$')
    if flags ~= nil and not flags:find('f') then add(leader) end
  end
  return #leaders > 0 and leaders or { '#', '//', '--', ';' }
end

--- Without a range, :AgiImplement takes the comment block at (or above) the cursor and the
--- signature and stub right below it.
H.implement_range = function(buf, row)
  local count = vim.api.nvim_buf_line_count(buf)
  local lo, hi = math.max(1, row - 200), math.min(count, row + 200)
  local text = vim.api.nvim_buf_get_lines(buf, lo - 1, hi, true)
  local line = function(r) return text[r - lo + 1] or '' end
  local leaders = H.comment_leaders(buf)
  local is_comment = function(r)
    local s = vim.trim(line(r))
    for _, leader in ipairs(leaders) do
      if s ~= '' and vim.startswith(s, leader) then return true end
    end
    return false
  end
  local first, last = row, row
  while first > lo and is_comment(first - 1) do
    first = first - 1
  end
  if is_comment(row) then
    while last < hi and is_comment(last + 1) do
      last = last + 1
    end
    if last < hi and vim.trim(line(last + 1)) ~= '' then last = H.stub_end(line, last + 1, hi) end
  elseif vim.trim(line(row)) ~= '' then
    last = H.stub_end(line, row, hi)
  end
  return { first, last }
end

--- The last line of the signature at {sig} and its (stub) body: deeper-indented lines, and a
--- closing bracket or `end` at the signature's indentation.
H.stub_end = function(line, sig, hi)
  local indent = function(r) return #line(r):match('^%s*') end
  local blank = function(r) return vim.trim(line(r)) == '' end
  local base, last = indent(sig), sig
  if last < hi and indent(last + 1) == base and line(last + 1):match('^%s*{') then last = last + 1 end
  while last < hi and (blank(last + 1) or indent(last + 1) > base) do
    last = last + 1
  end
  while last > sig and blank(last) do
    last = last - 1
  end
  if last < hi and indent(last + 1) == base then
    local s = vim.trim(line(last + 1))
    if s:match('^[%]})]') or s:match('^end%f[%W]') then last = last + 1 end
  end
  return last
end

-- Remote plugin --------------------------------------------------------------
H.rplugin_path = function() return vim.fs.normalize(vim.fn.resolve(H.root .. '/rplugin/python3/agi_nvim')) end

--- The functions of rplugin/python3/agi_nvim, as `:UpdateRemotePlugins` writes them.
H.specs = function()
  local spec = function(name, sync) return { type = 'function', name = name, sync = sync, opts = vim.empty_dict() } end
  return { spec('AgiHostCancel', false), spec('AgiHostInfo', true), spec('AgiHostRequest', false) }
end

--- The registered path of agi's remote plugin, or nil.
H.registered = function()
  local ok, plugins = pcall(vim.fn['remote#host#PluginsForHost'], 'python3')
  if not ok then return nil end
  for _, plugin in ipairs(plugins) do
    if plugin.path:match('agi_nvim/?$') then return plugin.path end
  end
  return nil
end

return M
