--- :checkhealth agi: the Python host, the agi import, the model, the remote-plugin registration.

local M, H = {}, {}

M.check = function()
  vim.health.start('agi: Python host')
  local prog, how = H.host_prog()
  if prog == nil then
    vim.health.error(how, { 'Set g:python3_host_prog to a Python 3 that has pynvim and agi; see :help agi-install' })
    return H.check_registration(nil)
  end
  local found = H.probe(prog)
  if found.probe_error then
    vim.health.error(prog .. ' (' .. how .. ') does not run: ' .. found.probe_error)
    return H.check_registration(nil)
  end
  vim.health.ok(string.format('Python %s: %s (%s)', found.version, found.python, how))
  if found.pynvim_error then
    vim.health.error('pynvim cannot be imported: ' .. found.pynvim_error, { prog .. ' -m pip install pynvim' })
  else
    vim.health.ok('pynvim ' .. found.pynvim)
  end

  vim.health.start('agi: the agi package')
  -- the distribution is agi-cli (PyPI's agi is another project), installed from this checkout
  local install = string.format("%s -m pip install -e '%s[nvim]'", prog, H.root())
  if found.agi_error then
    vim.health.error('the host Python cannot import agi: ' .. found.agi_error, {
      'Install agi into the Python that runs the host: ' .. install,
      'or point g:python3_host_prog at a Python that has it',
    })
  else
    vim.health.ok(string.format('agi %s from %s', found.agi, found.agi_path))
    if found.engine_error then
      vim.health.error('agi is there but its engine cannot load: ' .. found.engine_error, { install })
    else
      vim.health.ok('the engine imports (httpx, transport, agent)')
    end
    H.check_model(found)
  end
  H.check_registration(found)
end

H.root = function() return vim.fn.fnamemodify(debug.getinfo(1, 'S').source:sub(2), ':p:h:h:h') end

--- The Python that runs remote plugins, as Neovim chooses it, and how it was chosen.
H.host_prog = function()
  if vim.g.loaded_python3_provider == 0 then
    return nil, 'the python3 provider is disabled (g:loaded_python3_provider = 0)'
  end
  local prog = vim.g.python3_host_prog
  if prog ~= nil and prog ~= '' then
    local path = vim.fn.exepath(vim.fn.expand(prog, true))
    if path == '' then return nil, 'g:python3_host_prog (' .. prog .. ') is not an executable' end
    return path, 'g:python3_host_prog'
  end
  local ok, python = pcall(require, 'vim.provider.python')
  if not ok then return nil, 'g:python3_host_prog is not set' end
  local found, err = python.detect_by_module('neovim')
  if found == nil then return nil, err or 'no Python 3 with pynvim found' end
  return vim.fn.exepath(found) ~= '' and vim.fn.exepath(found) or found, 'found on $PATH'
end

-- Run in the host's Python, as the host runs (no '' on sys.path): what can it import?
H.probe_code = [[
import json, sys
sys.path = [p for p in sys.path if p != ""]
out = {"python": sys.executable, "version": sys.version.split()[0]}
try:
    import pynvim
    out["pynvim"] = getattr(pynvim, "__version__", "(unknown version)")
except Exception as e:
    out["pynvim_error"] = "%s: %s" % (type(e).__name__, e)
try:
    import agi
    out["agi"] = agi.__version__
    out["agi_path"] = agi.__file__
    from agi.frontends.nvim.health import report
    options = json.loads(sys.argv[1])
    out.update(report(options if isinstance(options, dict) else {}))
except Exception as e:
    out["agi_error"] = "%s: %s" % (type(e).__name__, e)
print(json.dumps(out))
]]

H.probe = function(prog)
  local config = require('agi').config
  local suggest = config.suggest or {}
  local nes = {
    format = suggest.nes_format,
    model = suggest.nes_model or suggest.model or config.model,
    base_url = suggest.nes_base_url or suggest.base_url or config.base_url,
  }
  local options = vim.json.encode({ model = config.model, base_url = config.base_url, sys = config.sys, nes = nes })
  local ok, result = pcall(
    function() return vim.system({ prog, '-c', H.probe_code, options }, { text = true }):wait(20000) end
  )
  if not ok then return { probe_error = tostring(result) } end
  local decoded, found = pcall(vim.json.decode, result.stdout or '')
  if result.code ~= 0 or not decoded or type(found) ~= 'table' then
    return {
      probe_error = string.format('exit %s: %s', result.code, vim.trim((result.stderr or '') .. (result.stdout or ''))),
    }
  end
  return found
end

H.check_model = function(found)
  vim.health.start('agi: model')
  local where = found.config_exists and ('config file ' .. found.config) or ('no config file at ' .. found.config)
  if found.model_error then
    vim.health.error(found.model_error, {
      'Set AGI_MODEL (and AGI_BASE_URL for a local server), put model = "..." in ' .. found.config,
      'or pass model to require("agi").setup()',
    })
    return
  end
  -- the wire protocol the run speaks (make_transport: the Messages API for anthropic:)
  local protocol = found.protocol and string.format(' (%s: POST %s)', found.protocol, found.endpoint) or ''
  vim.health.ok(string.format('model: %s at %s%s', found.model, found.base_url, protocol))
  H.check_api_key(found)
  vim.health.info(where .. '; requests are logged under ' .. found.home .. '/nvim')
  H.check_nes(found.nes)
end

--- The backend of next-edit suggestions (|agi-nes|): whether they are on, the prompt format,
--- the model and the endpoint it is asked at.
H.check_nes = function(nes)
  vim.health.start('agi: next-edit suggestions')
  local on = require('agi.suggest').config.nes
  if type(nes) ~= 'table' then return vim.health.info('next-edit suggestions: ' .. (on and 'on' or 'off')) end
  if nes.error then
    local report = on and vim.health.error or vim.health.info
    return report('next-edit suggestions (' .. (on and 'on' or 'off') .. '): no model: ' .. nes.error)
  end
  local text = string.format('%s format, model %s (%s: POST %s)', nes.format, nes.model, nes.protocol, nes.endpoint)
  if on then
    vim.health.ok('next-edit suggestions: on, ' .. text)
  else
    vim.health.info('next-edit suggestions: off (suggest.nes = true or :AgiNes on); they would use ' .. text)
  end
end

--- Whether the provider's API key is there, and where from; never the key itself.
H.check_api_key = function(found)
  local var = found.api_key_var ~= vim.NIL and found.api_key_var or nil
  if found.api_key then
    local from = found.api_key_source and (' (from ' .. found.api_key_source .. ')') or ''
    vim.health.ok('API key: found' .. from)
  elseif found.api_key_needed then
    local set = var and ('Set ' .. var .. ' (or AGI_API_KEY)') or 'Set AGI_API_KEY'
    vim.health.warn(
      string.format('API key: none found; %s needs one at %s', found.provider, found.base_url),
      { set .. ' in the environment Neovim starts from', 'or put api_key = "..." in ' .. found.config }
    )
  else
    local supply = var and ('; ' .. var .. ' would supply one') or ''
    vim.health.info('API key: none set (fine for a local server)' .. supply)
  end
end

H.check_registration = function(found)
  vim.health.start('agi: remote plugin')
  local path, by = require('agi')._registration()
  if path == nil then
    local running = pcall(vim.fn['remote#host#IsRunning'], 'python3')
      and vim.fn['remote#host#IsRunning']('python3') == 1
    vim.health.error('agi is not registered with the python3 host', {
      'Run :UpdateRemotePlugins and restart Neovim',
      running and 'the python3 host started before plugin/agi.lua could register agi'
        or 'check that plugin/agi.lua is loaded (is agi on the runtimepath?)',
    })
    return
  end
  if vim.fn.isdirectory(path) == 0 then
    vim.health.error(
      'registered at ' .. path .. ', which does not exist',
      { 'Run :UpdateRemotePlugins and restart Neovim' }
    )
    return
  end
  vim.health.ok('registered: ' .. path .. ' (by ' .. by .. ')')
  if found == nil or found.agi_error or found.pynvim_error then return end
  local ok, info = pcall(vim.fn.AgiHostInfo)
  if not ok then
    vim.health.error(
      'the python3 host does not answer: ' .. tostring(info),
      { 'See :messages and $NVIM_PYTHON_LOG_FILE' }
    )
  elseif info.agi_error or info.engine_error then
    vim.health.error('the running host cannot load agi: ' .. (info.agi_error or info.engine_error))
  else
    vim.health.ok(string.format('the python3 host runs agi %s on %s', info.agi, info.python))
  end
end

return M
