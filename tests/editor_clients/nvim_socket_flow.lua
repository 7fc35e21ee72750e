-- Neovim connecting to a drtriton-lsp started on a Unix socket, run by test_nvim_socket.py in a headless Neovim 0.11.
-- Configures the client with require('drtriton').socket_config, opens $DRTRITON_E2E_FILE, and writes to
-- $DRTRITON_E2E_RESULTS what it saw: the server's name and code lenses, or the messages if the server refused.

local results = {}

local function finish()
  local file = assert(io.open(os.getenv('DRTRITON_E2E_RESULTS'), 'w'))
  file:write(vim.json.encode(results))
  file:close()
  vim.cmd('qall!')
end

local ok, failure = pcall(function()
  local config = require('drtriton').socket_config({
    address = os.getenv('DRTRITON_SOCKET'),
    token_file = os.getenv('DRTRITON_TOKEN_FILE'),
  })
  -- The user's own init_options must reach the server beside the token (no worker starts ahead in a test).
  config.init_options = { device = 'cpu', warmWorker = false }
  vim.lsp.config('drtriton', config)
  vim.lsp.enable('drtriton')
  vim.cmd.edit(os.getenv('DRTRITON_E2E_FILE'))
  local client
  local function messages()
    return vim.api.nvim_exec2('messages', { output = true }).output
  end
  -- A refused initialize leaves the client neither initialized nor stopped; Neovim echoes the error instead.
  vim.wait(30000, function()
    client = client or vim.lsp.get_clients({ name = 'drtriton' })[1]
    return (client ~= nil and client.initialized) or messages():find('Error', 1, true) ~= nil
  end, 100)
  if not (client and client.initialized) then
    results.initialized = false
    results.messages = messages()
    return
  end
  results.initialized = true
  results.server_name = client.server_info.name
  local document = { textDocument = vim.lsp.util.make_text_document_params(0) }
  local response = client:request_sync('textDocument/codeLens', document, 30000, 0)
  results.lenses = vim.tbl_map(function(lens)
    return lens.command.title
  end, response.result or {})
  local command = { command = 'drtriton.printDebugInformation' }
  local debug_information = client:request_sync('workspace/executeCommand', command, 30000, 0)
  results.settings = vim.json.decode(debug_information.result).settings
  client:stop()
  vim.wait(10000, function()
    return client:is_stopped()
  end, 100)
end)
if not ok then
  results.error = tostring(failure)
end
finish()
