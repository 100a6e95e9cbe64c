-- :AgiRewind: put back the files that the buffer's last request changed (docs: checkpoints),
-- from the checkpoints of its session, by running `agi --rewind-files last -s SESSION` in the
-- background; the buffers of the files it restored or removed are reloaded.
local M = {}
local H = {}

--- The command that runs agi: the Python host's interpreter (`-m agi`), else `agi` on PATH.
H.program = function()
  local host = vim.g.python3_host_prog
  if type(host) == 'string' and host ~= '' and vim.fn.executable(vim.fn.expand(host)) == 1 then
    return { vim.fn.expand(host), '-m', 'agi' }
  end
  return { 'agi' }
end

H.notify = function(text, level) vim.notify('agi: ' .. text, vim.log.levels[level or 'INFO']) end

--- Reload the buffers of {paths} (absolute): unmodified ones from disk; others are named.
H.reload = function(paths)
  local kept = {}
  for _, buf in ipairs(vim.api.nvim_list_bufs()) do
    local name = vim.api.nvim_buf_get_name(buf)
    if vim.api.nvim_buf_is_loaded(buf) and name ~= '' and paths[vim.fs.normalize(name)] then
      if vim.bo[buf].modified then
        table.insert(kept, vim.fn.fnamemodify(name, ':~:.'))
      else
        vim.api.nvim_buf_call(buf, function() vim.cmd('silent! edit!') end)
      end
    end
  end
  return kept
end

--- The files restored or removed, from agi's `--output json` result ({restored = {...},
--- removed = {...}}: names exactly as they are, whatever bytes they hold).
H.changed = function(result, cwd)
  local paths, count = {}, 0
  for _, key in ipairs({ 'restored', 'removed' }) do
    for _, path in ipairs(type(result) == 'table' and result[key] or {}) do
      if path:sub(1, 1) ~= '/' then path = cwd .. '/' .. path end
      paths[vim.fs.normalize(path)] = true
      count = count + 1
    end
  end
  return paths, count
end

--- agi's one JSON line on stdout, decoded (nil when there is none).
H.decode = function(lines)
  local ok, result = pcall(vim.json.decode, table.concat(lines or {}, '\n'))
  return ok and result or nil
end

--- Rewind the files of {buf}'s last request (default: the current buffer); never blocks.
M.rewind = function(buf)
  buf = (buf == nil or buf == 0) and vim.api.nvim_get_current_buf() or buf
  local req = require('agi.request').last_of(buf)
  if req == nil or req.session == nil then
    return H.notify('nothing to rewind: this buffer has no request that reached the model', 'WARN')
  end
  if req.running then
    return H.notify('the last request is still running (:AgiCancel stops it)', 'WARN')
  end
  local cwd = vim.fn.getcwd()
  local out, err = {}, {}
  local cmd = vim.list_extend(
    H.program(),
    { '--rewind-files', 'last', '--output', 'json', '-s', req.session }
  )
  local ok, job = pcall(vim.fn.jobstart, cmd, {
    cwd = cwd,
    stdin = 'null',
    stdout_buffered = true,
    stderr_buffered = true,
    on_stdout = function(_, data) out = data end,
    on_stderr = function(_, data) err = data end,
    on_exit = function(_, code)
      vim.schedule(function() H.done(code, out, err, cwd) end)
    end,
  })
  if not ok or job <= 0 then H.notify('cannot run agi: ' .. table.concat(cmd, ' '), 'ERROR') end
end

H.done = function(code, out, err, cwd)
  local paths, count = H.changed(H.decode(out), cwd)
  local kept = H.reload(paths)
  local problems = vim.tbl_filter(function(l) return l ~= '' end, err or {})
  if code ~= 0 then
    return H.notify(problems[#problems] or ('rewind failed (exit ' .. code .. ')'), 'ERROR')
  end
  local text = count == 0 and 'nothing to rewind: the last request changed no file'
    or ('rewound ' .. count .. ' file' .. (count > 1 and 's' or ''))
  if #kept > 0 then text = text .. '; not reloaded (unsaved changes): ' .. table.concat(kept, ', ') end
  if #problems > 0 then text = text .. '\n' .. table.concat(problems, '\n') end
  H.notify(text, #kept > 0 and 'WARN' or 'INFO')
end

M._changed = H.changed -- for tests
return M
