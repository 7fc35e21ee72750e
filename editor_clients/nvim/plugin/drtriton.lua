-- drtriton's user commands and autocommands, defined once per session (Neovim 0.11+).
-- The server itself starts with vim.lsp.enable('drtriton') (lsp/drtriton.lua); these act on it once attached.

if vim.g.loaded_drtriton then
  return
end
vim.g.loaded_drtriton = true

if vim.fn.has('nvim-0.11') == 0 then
  vim.notify('drtriton needs Neovim 0.11 or later; run :checkhealth drtriton for details', vim.log.levels.WARN)
  return
end

local drtriton = require('drtriton')
local commands = drtriton.server_commands

local function target_command(name, server_command, description)
  vim.api.nvim_create_user_command(name, function(options)
    drtriton.run_target_command(server_command, options.line1, options.line2)
  end, { range = true, desc = description })
end

target_command('DrtritonGenerate', commands.generate, 'drtriton: generate, verify and time a Triton kernel for the target at the cursor')
target_command('DrtritonVerify', commands.verify, 'drtriton: verify the stored kernel of the target at the cursor again, with new inputs')
target_command('DrtritonBenchmark', commands.benchmark, 'drtriton: time the verified kernel of the target at the cursor again (GPU)')
target_command('DrtritonApply', commands.apply, 'drtriton: write the verified kernel into the target at the cursor')
target_command('DrtritonShowReport', commands.show_report, 'drtriton: open the report of the target at the cursor')
target_command('DrtritonCancel', commands.cancel, 'drtriton: cancel the job running on the target at the cursor')
target_command('DrtritonRemoveKernel', commands.remove_kernel, 'drtriton: remove the kernel written into the target at the cursor')
vim.api.nvim_create_user_command('DrtritonDebugInformation', drtriton.show_debug_information, {
  desc = 'drtriton: versions, settings, devices and jobs, in a scratch buffer',
})
vim.api.nvim_create_user_command('DrtritonRestart', drtriton.restart, { desc = 'drtriton: restart the language server' })

local group = vim.api.nvim_create_augroup('drtriton', { clear = true })
vim.api.nvim_create_autocmd('LspAttach', {
  group = group,
  callback = function(event)
    local client = vim.lsp.get_client_by_id(event.data.client_id)
    if client and client.name == drtriton.client_name then
      drtriton.on_attach(client, event.buf)
    end
  end,
})
vim.api.nvim_create_autocmd('LspProgress', { group = group, callback = drtriton.on_progress })
