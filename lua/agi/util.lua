--- What the agi modules share: checking options, errors and messages in agi's voice, and a
--- status of their own in g:agi_status.

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

--- A status of one's own in g:agi_status (for statuslines), never in messages: typing on must
--- stay quiet. `set(text)` shows {text}; `clear()` takes it away unless another one replaced it.
---@return { set: fun(text: string), clear: fun() }
M.status = function()
  local own
  return {
    set = function(text)
      own = text
      vim.g.agi_status = text
      pcall(vim.cmd.redrawstatus)
    end,
    clear = function()
      if own ~= nil and vim.g.agi_status == own then vim.g.agi_status = '' end
      own = nil
    end,
  }
end

return M
