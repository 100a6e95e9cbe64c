--- *agi* Refactor a range, implement from a comment; Neovim never waits for the model.
---
--- The commands snapshot the range (its lines, `b:changedtick` and an extmark that follows it
--- as lines move) and hand the request to agi's Python remote plugin, which runs it on a worker
--- thread and reports back through `nvim.async_call`: batched progress (the streamed proposal,
--- shown by lua/agi/preview.lua), then the result. The result is applied here, with one
--- |nvim_buf_set_lines()| (one undo step), only if the range still holds the snapshot's text;
--- or shown whole, or as hunks (lua/agi/review.lua). `User AgiDone` fires exactly once per
--- request. See |agi.txt|.

local M, H = {}, {}
local Request, Range, U = require('agi.request'), require('agi.range'), require('agi.util')

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
  -- "direct": apply the result at once; "preview": show it, then :AgiAccept / :AgiReject;
  -- "review": show it as hunks, each taken or dropped with :AgiAccept / :AgiReject
  apply = 'direct',
  -- show the proposal as dimmed virtual lines below the range while the model writes it
  stream = true,
  -- lines of context sent before and after the range
  context = 40,
  -- a spinner with the elapsed time at the range while the model works
  spinner = true,
  -- start the Python host shortly after startup, so no command waits for it
  warmup = true,
  -- buffer-local keys while a review (apply = "review") is shown; '' leaves one unmapped
  mappings = { next_hunk = ']h', prev_hunk = '[h' },
  -- inline suggestions as you type, off by default: see |agi-suggest| for the other fields
  suggest = { enabled = false, debounce_ms = 250 },
}

--- Validate {config}, merge it into the defaults, and apply it. Optional.
---@param config table|nil
M.setup = function(config)
  M.config = H.setup_config(config)
  H.set_up = true
  H.autocmds()
  require('agi.suggest').setup(M.config.suggest)
  require('agi.nes')._apply()
end

--- Rewrite lines {range} (default: the current line) of the current buffer as instructed.
---@param instruction string
---@param range table|nil `{first, last}`, 1-based and inclusive
---@return integer|nil The request id
M.refactor = function(instruction, range)
  if H.is_disabled() then return U.notify('disabled in this buffer (b:agi_disable)', 'WARN') end
  instruction = vim.trim(instruction or '')
  if instruction == '' then
    return U.notify(':AgiRefactor needs an instruction, e.g. :AgiRefactor use a list comprehension', 'ERROR')
  end
  local row = vim.api.nvim_win_get_cursor(0)[1]
  range = range or { row, row }
  return Request.start('refactor', vim.api.nvim_get_current_buf(), range[1], range[2], instruction)
end

--- Implement the function described by the comment or signature in {range}. Without a range:
--- the comment block at the cursor (or above the signature at the cursor) with the signature and
--- stub below it.
---@param instruction string|nil
---@param range table|nil `{first, last}`, 1-based and inclusive
---@return integer|nil The request id
M.implement = function(instruction, range)
  if H.is_disabled() then return U.notify('disabled in this buffer (b:agi_disable)', 'WARN') end
  local buf = vim.api.nvim_get_current_buf()
  range = range or Range.implement(buf, vim.api.nvim_win_get_cursor(0)[1])
  local lines = vim.api.nvim_buf_get_lines(buf, math.min(range[1], range[2]) - 1, math.max(range[1], range[2]), false)
  if vim.trim(table.concat(lines, '')) == '' then
    return U.notify(':AgiImplement needs a comment or a signature to implement, at the cursor or in the range', 'ERROR')
  end
  return Request.start('implement', buf, range[1], range[2], vim.trim(instruction or ''))
end

--- Ask again for the last request of buffer {buf} (default: current), continuing its session
--- with {instruction}. The new proposal replaces the one shown; after an apply it changes the
--- applied lines, and is applied the same way.
---@param instruction string
---@param buf integer|nil
---@return integer|nil The request id
M.refine = function(instruction, buf)
  if H.is_disabled() then return U.notify('disabled in this buffer (b:agi_disable)', 'WARN') end
  buf = U.buf(buf)
  instruction = vim.trim(instruction or '')
  if instruction == '' then return U.notify(':AgiRefine needs an instruction, e.g. :AgiRefine shorter', 'ERROR') end
  local id, why = Request.refine(buf, instruction)
  if id == nil then U.notify(why, 'WARN') end
  return id
end

--- Show the model of later requests, or set it to {name} (`provider:model`) for this Neovim.
--- Without {name} and before the Python host has said which model agi's configuration picks,
--- the host is asked and the model is shown when it answers.
---@param name string|nil
---@return string|nil The model, nil until the host has answered
M.model = function(name)
  name = vim.trim(name or '')
  if name == '' then
    if M.config.model ~= nil or H.model_names ~= nil then return H.show_model() end
    H.show_when_known = true
    H.ask_models(true)
    return nil
  end
  H.ask_models()
  if name:find('%s') then return U.notify('a model name has no spaces: ' .. vim.inspect(name), 'ERROR') end
  M.config.model = name
  U.notify('model for the next requests: ' .. name, 'INFO')
  return name
end

--- Ask the model to fix the diagnostics in lines {range} (default: the current line) of the
--- current buffer, applied as `apply` says (direct, preview or review), one undo step.
---@param instruction string|nil More for the model to know
---@param range table|nil `{first, last}`, 1-based and inclusive
---@return integer|nil The request id
M.fix = function(instruction, range)
  if H.is_disabled() then return U.notify('disabled in this buffer (b:agi_disable)', 'WARN') end
  local row = vim.api.nvim_win_get_cursor(0)[1]
  range = range or { row, row }
  return Request.start('fix', vim.api.nvim_get_current_buf(), range[1], range[2], vim.trim(instruction or ''))
end

--- Next-edit suggestions (|agi-nes|): move to the next hunk shown.
---@return boolean Whether there was one
M.nes_jump = function() return require('agi.nes').jump() end

--- Apply the next-edit hunk at the cursor, as one undo step.
---@return boolean Whether one was applied
M.nes_accept = function() return require('agi.nes').accept() end

--- Apply every next-edit hunk shown, as one undo step.
---@return integer How many were applied
M.nes_accept_all = function() return require('agi.nes').accept_all() end

--- Drop the next-edit hunks shown and cancel the request in flight.
M.nes_dismiss = function() return require('agi.nes').dismiss() end

--- Whether next-edit hunks are shown in the current buffer.
---@return boolean
M.nes_visible = function() return require('agi.nes').visible() end

--- Cancel the running requests of buffer {buf} (default: current): the model connection is
--- closed at once and nothing is applied.
---@param buf integer|nil
---@return integer The number of requests cancelled
M.cancel = function(buf)
  local count = Request.cancel(U.buf(buf))
  if count == 0 then U.notify('no request is running in this buffer', 'INFO') end
  return count
end

--- Take the change of buffer {buf} at the cursor: while reviewing, the hunk under the cursor
--- (with {all}: every hunk left, as one undo step); else the preview at the cursor (or the
--- latest one).
---@param buf integer|nil
---@param all boolean|nil
M.accept = function(buf, all) Request.decide(U.buf(buf), true, all) end

--- Drop the change of buffer {buf} at the cursor, as |agi.accept()| takes it.
---@param buf integer|nil
---@param all boolean|nil
M.reject = function(buf, all) Request.decide(U.buf(buf), false, all) end

--- Open the log (the session trace) of the last request in a split; its winbar tells how the
--- request ended and what it used.
M.log = function()
  local entry = Request.latest_log()
  if entry == nil then return U.notify('no request has been logged yet', 'WARN') end
  vim.cmd('split ' .. vim.fn.fnameescape(entry.path))
  vim.bo.readonly, vim.bo.bufhidden = true, 'wipe'
  local summary = entry.summary or 'agi: the request is running'
  vim.wo.winbar = '%#AgiHint#' .. summary:gsub('%%', '%%%%')
end

--- What `g:agi_status` holds, for statuslines: a spinner and the elapsed time while requests
--- run; after one, its tokens and cost; '' before any.
---@return string
M.status = function() return vim.g.agi_status or '' end

-- Called from the Python host (agi.frontends.nvim.plugin) through nvim_exec_lua.
M._event = function(id, event) Request.event(id, event) end

-- Called from the Python host with the names :AgiModel completes (agi.frontends.nvim.plugin.model_names).
M._models = function(found)
  H.model_names = type(found.names) == 'table' and found.names or {}
  H.configured = type(found.configured) == 'string' and found.configured or nil
  if H.show_when_known then H.show_model() end
end

-- :AgiModel's completion: the host's list (asked for again, for next time), filtered by {lead}.
M._complete_model = function(lead)
  H.ask_models()
  local out, seen = {}, {}
  local add = function(name)
    if type(name) == 'string' and not seen[name] and vim.startswith(name, lead or '') then
      seen[name] = true
      table.insert(out, name)
    end
  end
  add(M.config.model)
  add(H.configured)
  for _, name in ipairs(H.model_names or {}) do
    add(name)
  end
  return out
end

-- Called from plugin/agi.lua at startup: the defaults apply when the user's config has not
-- called `setup`, and agi's remote plugin is registered.
M._startup = function()
  if not H.set_up then M.setup() end
  M._register()
end

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
  H.ask_models()
end

M._registration = function() return H.registered(), H.registered_by end

-- Called from plugin/agi.lua after startup: `:help agi` works after a plain install (a clone, a
-- plugin manager without a help-tags step) because doc/tags is made when missing or older than
-- doc/agi.txt. A read-only install keeps what it has.
M._helptags = function()
  local doc = H.root .. '/doc'
  local text, tags = vim.uv.fs_stat(doc .. '/agi.txt'), vim.uv.fs_stat(doc .. '/tags')
  if text == nil or (tags ~= nil and tags.mtime.sec >= text.mtime.sec) then return end
  if vim.fn.filewritable(doc) ~= 2 then return end
  pcall(vim.cmd.helptags, vim.fn.fnameescape(doc))
end

H.highlights = function()
  local link = function(name, to) vim.api.nvim_set_hl(0, name, { link = to, default = true }) end
  link('AgiStream', 'Comment') -- the proposal while it streams in
  link('AgiTool', 'Special') -- a tool step while it streams in
  link('AgiAdd', 'DiffAdd') -- proposed lines (preview, review)
  link('AgiDelete', 'DiffDelete') -- lines a proposal replaces
  link('AgiHint', 'Comment') -- how to take a change; the log's summary
end

--- Created by `setup` (plugin/agi.lua calls it at startup when the user's config has not).
H.autocmds = function()
  H.highlights()
  local group = vim.api.nvim_create_augroup('agi', { clear = true })
  -- A buffer that goes away takes its requests and reviews with it.
  vim.api.nvim_create_autocmd('BufUnload', { group = group, callback = function(ev) Request.unload(ev.buf) end })
  vim.api.nvim_create_autocmd('ColorScheme', { group = group, callback = H.highlights })
end

-- Helper data ================================================================
H.default_config = vim.deepcopy(M.config)
H.models_asked = 0
H.show_when_known = false -- :AgiModel waits for the host's answer to show the model
H.root = vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h:h')
H.registered_by = 'the remote-plugin manifest'

-- Helper functionality =======================================================
-- Settings -------------------------------------------------------------------
H.setup_config = function(config) return require('agi.options').main(config, H.default_config) end

H.is_disabled = function() return vim.g.agi_disable == true or vim.b.agi_disable == true end

-- Models -------------------------------------------------------------------
-- :AgiModel's names come from the host, asked (at most once a second) when it is running;
-- with {start}, the host is started to ask it.
H.ask_models = function(start)
  if vim.uv.now() - H.models_asked < 1000 and H.model_names ~= nil then return end
  local ok, running = pcall(vim.fn['remote#host#IsRunning'], 'python3')
  if not ok or (running ~= 1 and not start) or not H.registered() then return end
  H.models_asked = vim.uv.now()
  local asked, err = pcall(vim.fn.AgiHostModels)
  if not asked and H.show_when_known then
    H.show_when_known = false
    U.notify('cannot ask the Python host which model agi uses: ' .. tostring(err) .. ' (:checkhealth agi)', 'ERROR')
  end
end

--- The model the next request uses, and where that comes from.
H.show_model = function()
  H.show_when_known = false
  local model = M.config.model or H.configured
  if M.config.model ~= nil then
    U.notify('model: ' .. model .. ' (set in this Neovim)', 'INFO')
  elseif model ~= nil then
    U.notify('model: ' .. model .. " (agi's configuration)", 'INFO')
  else
    U.notify('no model configured: set AGI_MODEL or model in config.toml, or :AgiModel NAME (:checkhealth agi)', 'WARN')
  end
  return model
end

-- Remote plugin --------------------------------------------------------------
H.rplugin_path = function() return vim.fs.normalize(vim.fn.resolve(H.root .. '/rplugin/python3/agi_nvim')) end

--- The functions of rplugin/python3/agi_nvim, as `:UpdateRemotePlugins` writes them.
H.specs = function()
  local spec = function(name, sync) return { type = 'function', name = name, sync = sync, opts = vim.empty_dict() } end
  return { spec('AgiHostCancel', false), spec('AgiHostInfo', true), spec('AgiHostModels', false),
    spec('AgiHostRequest', false), spec('AgiHostSuggest', false), spec('AgiHostSuggestCancel', false),
    spec('AgiHostNes', false), spec('AgiHostNesCancel', false) }
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
