-- The test Neovim: agi on the runtimepath, the test's Python as the host, AgiDone recorded.
vim.opt.runtimepath:prepend(vim.env.AGI_TEST_REPO)
vim.g.python3_host_prog = vim.env.AGI_TEST_PYTHON
vim.o.swapfile = false
vim.o.shadafile = 'NONE'

_G.agi_done = {}
vim.api.nvim_create_autocmd('User', {
  pattern = 'AgiDone',
  callback = function(ev) table.insert(_G.agi_done, ev.data) end,
})

if vim.env.AGI_TEST_SETUP and vim.env.AGI_TEST_SETUP ~= '' then
  require('agi').setup(vim.json.decode(vim.env.AGI_TEST_SETUP))
end
