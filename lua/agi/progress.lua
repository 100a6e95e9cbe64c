--- How running requests show: a spinner with the phase and elapsed time at each range, and
--- `g:agi_status` for statuslines (the spinner while requests run; after, the last one's usage).
--- Used by lua/agi/request.lua, which owns the requests.

local M, H = {}, {}

--- Start, keep or stop the spinner for {source}: `{requests, rows, ns}`, the running requests by
--- id, rows(req) -> first, last (0-based) of a request's range, and the namespace of the marks.
M.spin = function(source)
  H.source = source
  local running = next(source.requests) ~= nil
  if running and H.timer == nil then
    H.timer = vim.uv.new_timer()
    H.timer:start(0, 100, vim.schedule_wrap(H.tick))
  elseif not running and H.timer ~= nil then
    H.timer:stop()
    H.timer:close()
    H.timer = nil
    H.tick()
  elseif not running then
    H.tick()
  end
end

--- A request stopped with {usage}: `g:agi_status` shows it once none runs.
M.stopped = function(usage) H.last_usage = usage end

--- `{input, output, cost}` from the host's usage (cost nil when unknown).
M.usage = function(u)
  local cost = u.cost
  if cost == vim.NIL then cost = nil end
  return { input = tonumber(u.input) or 0, output = tonumber(u.output) or 0, cost = cost }
end

--- `1234 in, 56 out, $0.0123` (or `cost unknown`), as agi.providers.cost.describe() says it.
M.describe = function(u)
  return string.format('%d in, %d out, %s', u.input, u.output, u.cost and H.money(u.cost) or 'cost unknown')
end

-- Helpers ----------------------------------------------------------------------
H.frames = { '⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏' }
H.last_usage = nil -- of the request that stopped last, for g:agi_status

--- `$0.0123`, `$0.01`, `$1.50`; small sums keep six decimals (`$0.000072`): agi.providers.cost.money().
H.money = function(usd)
  local text = string.format((usd >= 0.01 or usd == 0) and '%.4f' or '%.6f', usd)
  local whole, fraction = text:match('^(%d+)%.(%d*)$')
  if whole == nil then return '$' .. text end
  fraction = fraction:gsub('0+$', '')
  return '$' .. whole .. '.' .. fraction .. string.rep('0', 2 - #fraction)
end

H.tick = function()
  local frame = H.frames[math.floor(vim.uv.hrtime() / 1e8) % #H.frames + 1]
  local count, oldest = 0, nil
  local spinner = require('agi').config.spinner
  for _, req in pairs(H.source.requests) do
    count = count + 1
    oldest = math.min(oldest or req.started, req.started)
    if spinner then H.show_spinner(req, frame) end
  end
  local status = H.last_usage and ('agi ' .. M.describe(H.last_usage)) or ''
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
  local first = H.source.rows(req)
  if first == nil then return end
  local text = string.format(' %s agi %s: %s %.1fs', frame, req.kind, req.phase, (vim.uv.hrtime() - req.started) / 1e9)
  if req.chars > 0 then text = text .. string.format(' · %d chars', req.chars) end
  req.spinner = vim.api.nvim_buf_set_extmark(req.buf, H.source.ns, first, 0, {
    id = req.spinner,
    virt_text = { { text, 'Comment' } },
    virt_text_pos = 'eol',
    hl_mode = 'combine',
  })
end

return M
