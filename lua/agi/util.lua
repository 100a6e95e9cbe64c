--- What the agi modules share: checking options, and errors and messages in agi's voice.

local M = {}

--- Raise an error unless {value} is of type {kind} (or nil, when {optional}).
---@param name string How the user wrote it: `config.model`, `suggest.fim`, ...
M.check = function(name, value, kind, optional)
  if (value == nil and optional) or type(value) == kind then return end
  M.error(string.format('`%s` should be %s, not %s', name, kind, type(value)))
end

--- An error for the user (no traceback position).
M.error = function(msg) error('(agi) ' .. msg, 0) end

--- A message; {level} is a |vim.log.levels| name, INFO by default.
M.notify = function(msg, level) vim.notify('(agi) ' .. msg, vim.log.levels[level or 'INFO']) end

--- Buffer {buf}, with nil and 0 meaning the current one.
M.buf = function(buf) return (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf end

return M
