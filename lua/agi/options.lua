--- The options of `require('agi').setup()`, checked: {config} merged into {defaults}, with an
--- error naming the first field that is wrong.

local M = {}
local U = require('agi.util')

--- The plugin's options (lua/agi/init.lua); its `suggest` table is checked by M.suggest.
M.main = function(config, defaults)
  U.check('config', config, 'table', true)
  config = vim.tbl_deep_extend('force', vim.deepcopy(defaults), config or {})
  U.check('config.model', config.model, 'string', true)
  U.check('config.base_url', config.base_url, 'string', true)
  U.check('config.sys', config.sys, 'table', true)
  U.check('config.context', config.context, 'number')
  U.check('config.spinner', config.spinner, 'boolean')
  U.check('config.warmup', config.warmup, 'boolean')
  config.suggest = M.suggest(config.suggest, require('agi.suggest')._defaults())
  U.check('config.react', config.react, 'boolean')
  if type(config.tools) ~= 'boolean' and type(config.tools) ~= 'table' then
    U.error('`config.tools` should be a boolean or a list of tool names, not ' .. type(config.tools))
  end
  if config.apply ~= 'direct' and config.apply ~= 'preview' and config.apply ~= 'review' then
    U.error('`config.apply` should be "direct", "preview" or "review", not ' .. vim.inspect(config.apply))
  end
  U.check('config.stream', config.stream, 'boolean')
  U.check('config.mappings', config.mappings, 'table')
  U.check('config.mappings.next_hunk', config.mappings.next_hunk, 'string')
  U.check('config.mappings.prev_hunk', config.mappings.prev_hunk, 'string')
  if config.context < 0 then U.error('`config.context` should be 0 or more, not ' .. config.context) end
  return config
end

--- Inline suggestions' options (lua/agi/suggest.lua).
M.suggest = function(config, defaults)
  U.check('suggest', config, 'table', true)
  config = vim.tbl_deep_extend('force', vim.deepcopy(defaults), config or {})
  U.check('suggest.enabled', config.enabled, 'boolean')
  U.check('suggest.model', config.model, 'string', true)
  U.check('suggest.base_url', config.base_url, 'string', true)
  for _, name in ipairs({ 'debounce_ms', 'context_lines', 'max_tokens', 'max_lines', 'max_filesize' }) do
    U.check('suggest.' .. name, config[name], 'number')
    local least = (name == 'debounce_ms' or name == 'context_lines') and 0 or 1
    if config[name] < least then U.error(string.format('`suggest.%s` should be %d or more, not %s', name, least, config[name])) end
  end
  if not vim.tbl_contains({ 'auto', 'completions', 'infill', 'chat' }, config.fim) then
    U.error('`suggest.fim` should be "auto", "completions", "infill" or "chat", not ' .. vim.inspect(config.fim))
  end
  U.check('suggest.filetypes', config.filetypes, 'table')
  for ft, on in pairs(config.filetypes) do
    U.check('suggest.filetypes.' .. ft, on, 'boolean')
  end
  U.check('suggest.params', config.params, 'table')
  U.check('suggest.nes', config.nes, 'boolean')
  for _, name in ipairs({ 'nes_delay', 'nes_history', 'nes_window' }) do
    U.check('suggest.' .. name, config[name], 'number')
    local least = name == 'nes_delay' and 0 or 1
    if config[name] < least then U.error(string.format('`suggest.%s` should be %d or more, not %s', name, least, config[name])) end
  end
  if not vim.tbl_contains({ 'chat', 'zeta', 'sweep' }, config.nes_format) then
    U.error('`suggest.nes_format` should be "chat", "zeta" or "sweep", not ' .. vim.inspect(config.nes_format))
  end
  U.check('suggest.nes_model', config.nes_model, 'string', true)
  U.check('suggest.nes_base_url', config.nes_base_url, 'string', true)
  if config.keys ~= false then
    U.check('suggest.keys', config.keys, 'table')
    for name, lhs in pairs(config.keys) do
      if defaults.keys[name] == nil then U.error('`suggest.keys.' .. name .. '` is not a key agi maps') end
      if lhs ~= false then U.check('suggest.keys.' .. name, lhs, 'string') end
    end
  end
  return config
end

return M
