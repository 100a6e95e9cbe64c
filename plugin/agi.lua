-- agi: the user commands, the remote-plugin registration and the host warm-up. See :help agi.
if vim.g.loaded_agi then return end
vim.g.loaded_agi = true

-- The remote-plugin manifest must be read before agi looks for itself in it.
vim.cmd('runtime plugin/rplugin.vim')
require('agi')._startup()

local command = function(name, fn, opts) vim.api.nvim_create_user_command(name, fn, opts) end
local range = function(o) return o.range > 0 and { o.line1, o.line2 } or nil end

command('AgiRefactor', function(o) require('agi').refactor(o.args, range(o)) end, {
  range = true,
  nargs = '*',
  desc = 'agi: rewrite the lines in range as instructed',
})
command('AgiImplement', function(o) require('agi').implement(o.args, range(o)) end, {
  range = true,
  nargs = '*',
  desc = 'agi: implement the function described by the comment or signature',
})
command('AgiFix', function(o) require('agi').fix(o.args, range(o)) end, {
  range = true,
  nargs = '*',
  desc = 'agi: fix the diagnostics in range (default: the current line)',
})
command('AgiNes', function(o) require('agi.nes').set(o.args) end, {
  nargs = '?',
  complete = function() return { 'on', 'off', 'toggle' } end,
  desc = 'agi: next-edit suggestions on, off or toggle',
})
command('AgiCancel', function() require('agi').cancel() end, { desc = "agi: cancel this buffer's requests" })
command('AgiAccept', function(o) require('agi').accept(nil, o.bang) end, {
  bang = true,
  desc = 'agi: take the change (or hunk) at the cursor; with !: every hunk left',
})
command('AgiReject', function(o) require('agi').reject(nil, o.bang) end, {
  bang = true,
  desc = 'agi: drop the change (or hunk) at the cursor; with !: every hunk left',
})
command('AgiLog', function() require('agi').log() end, { desc = 'agi: open the log of the last request' })
command('AgiSuggest', function() require('agi.suggest').trigger() end, {
  desc = 'agi: an inline suggestion at the cursor now (in Normal mode: for the line below)',
})
command('AgiRefine', function(o) require('agi').refine(o.args) end, {
  nargs = '+',
  desc = "agi: ask again for this buffer's last request, continuing its conversation",
})
command('AgiRewind', function() require('agi.rewind').rewind() end, {
  desc = "agi: restore the files this buffer's last request changed",
})
command('AgiModel', function(o) require('agi').model(o.args) end, {
  nargs = '?',
  complete = function(lead) return require('agi')._complete_model(lead) end,
  desc = 'agi: show or set the model of later requests',
})

-- Start the Python host once the editor is up, so that no command waits for it; make the help
-- tags if they are missing or stale.
local warmup = function()
  vim.defer_fn(function()
    require('agi')._helptags()
    require('agi')._warmup()
  end, 50)
end
if vim.v.vim_did_enter == 1 then
  warmup()
else
  vim.api.nvim_create_autocmd('VimEnter', { once = true, callback = warmup })
end
