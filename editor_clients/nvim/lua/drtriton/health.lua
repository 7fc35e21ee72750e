-- :checkhealth drtriton: is Neovim new enough, can the server start, is it enabled and attached.
-- Each problem says what to do next.

local M = {}

local function check_neovim()
  if vim.fn.has('nvim-0.11') == 1 then
    vim.health.ok('Neovim ' .. tostring(vim.version()))
  else
    vim.health.error('Neovim ' .. tostring(vim.version()) .. ' is too old', 'drtriton needs Neovim 0.11 or later')
  end
end

local function check_server_command()
  local config = vim.lsp.config.drtriton
  if not config or not config.cmd then
    vim.health.error('no lsp/drtriton.lua on the runtimepath', 'add editor_clients/nvim to the runtimepath (see docs/editors.md)')
    return
  end
  if type(config.cmd) == 'function' then
    vim.health.info('the server command is a function; not checked')
    return
  end
  local executable = config.cmd[1]
  if vim.fn.executable(executable) == 0 then
    vim.health.error(executable .. ' was not found on PATH', {
      'install drtriton into a Python environment (make setup in a drtriton checkout gives .venv/bin/drtriton-lsp)',
      "or point Neovim at it: vim.lsp.config('drtriton', { cmd = { '/path/to/venv/bin/drtriton-lsp' } })",
    })
    return
  end
  local version = vim.system({ executable, '--version' }, { text = true }):wait()
  if version.code == 0 then
    vim.health.ok(vim.trim(version.stdout) .. ' (' .. vim.fn.exepath(executable) .. ')')
  else
    vim.health.error(executable .. ' --version failed: ' .. vim.trim(version.stderr), 'reinstall drtriton-lsp in that environment')
  end
end

local function check_clients()
  if not vim.lsp.is_enabled('drtriton') then
    vim.health.warn('drtriton is not enabled', "add vim.lsp.enable('drtriton') to your config")
    return
  end
  vim.health.ok('enabled for Python buffers')
  local clients = vim.lsp.get_clients({ name = 'drtriton' })
  if #clients == 0 then
    vim.health.info('no drtriton client is running; open a Python file to start one')
  end
  for _, client in ipairs(clients) do
    local buffers = vim.tbl_keys(client.attached_buffers)
    vim.health.ok(('client %d running (root %s), attached to %d buffer(s)'):format(client.id, client.root_dir or 'none', #buffers))
    local commands = vim.tbl_get(client.server_capabilities or {}, 'executeCommandProvider', 'commands') or {}
    vim.health.info('server commands: ' .. table.concat(commands, ', '))
  end
end

function M.check()
  vim.health.start('drtriton')
  check_neovim()
  check_server_command()
  check_clients()
end

return M
