-- drtriton for Neovim: commands on the target at the cursor, code lens refresh, reports beside the code, job progress.
-- plugin/drtriton.lua binds these to user commands and autocommands; lsp/drtriton.lua holds the client config.

local M = {}

M.client_name = 'drtriton'

--- The server's `workspace/executeCommand` ids (drtriton_lsp/server/*.py).
M.server_commands = {
  generate = 'drtriton.generate',
  verify = 'drtriton.verify',
  benchmark = 'drtriton.benchmark',
  apply = 'drtriton.apply',
  show_report = 'drtriton.showReport',
  cancel = 'drtriton.cancel',
  debug_information = 'drtriton.printDebugInformation',
}

local nothing_to_run = {
  [M.server_commands.generate] = 'no target at the cursor (an nn.Module with a forward, or a function that calls torch), '
    .. 'or a job is already running on it',
  [M.server_commands.verify] = 'no kernel to verify at the cursor (or a job is running on it); run :DrtritonGenerate first',
  [M.server_commands.benchmark] = 'no verified kernel to benchmark at the cursor (or a job is running on it); '
    .. 'run :DrtritonGenerate first',
  [M.server_commands.apply] = 'no verified kernel to apply at the cursor; run :DrtritonGenerate first',
  [M.server_commands.show_report] = 'no report at the cursor yet; run :DrtritonGenerate first',
  [M.server_commands.cancel] = 'no job is running on the target at the cursor',
}

local RESTART_WAIT_MS = 5000

--- Running jobs by progress token: { target = name, step = text }.
local running_jobs = {}
--- The last finished job's one-line result, e.g. "ScaledActivation: verified · no speed measured: no GPU".
local last_result = nil

local function notify(message, level)
  vim.notify('drtriton: ' .. message, level or vim.log.levels.INFO)
end

local function attached_client(bufnr)
  return vim.lsp.get_clients({ bufnr = bufnr, name = M.client_name })[1]
end

--- The token in `path` (the server's --token-file), without surrounding whitespace; an error says what to fix.
function M.read_token(path)
  local file, problem = io.open(vim.fn.expand(path), 'r')
  if not file then
    error(('drtriton: cannot read the token file %s (%s); give socket_config the --token-file drtriton-lsp was '
      .. 'started with'):format(path, problem), 0)
  end
  local token = vim.trim(file:read('*a') or '')
  file:close()
  if token == '' then
    error(('drtriton: the token file %s is empty; it must hold the server\'s token'):format(path), 0)
  end
  return token
end

--- Client config fields for a drtriton-lsp you started on a socket, for vim.lsp.config('drtriton', ...):
--- connect to `address` (a --socket path, or HOST:PORT for --tcp) instead of starting a server, and send the
--- token in `token_file` as initializationOptions.authToken, read at each start (the plugin never logs it).
---@param options { address: string, token_file: string }
---@return vim.lsp.Config
function M.socket_config(options)
  vim.validate('address', options.address, 'string')
  vim.validate('token_file', options.token_file, 'string')
  local host, port = options.address:match('^(.+):(%d+)$')
  local cmd
  if host and not options.address:find('/', 1, true) then
    cmd = vim.lsp.rpc.connect((host:gsub('^%[(.*)%]$', '%1')), tonumber(port))
  else
    cmd = vim.lsp.rpc.connect(vim.fn.expand(options.address))
  end
  return {
    cmd = cmd,
    before_init = function(params)
      local token = { authToken = M.read_token(options.token_file) }
      params.initializationOptions = vim.tbl_extend('force', params.initializationOptions or {}, token)
    end,
  }
end

--- Runs `server_command` on every target in lines [first_line, last_line] (1-based) for which drtriton's
--- code actions offer it, so the server decides what a target is and what it allows right now.
function M.run_target_command(server_command, first_line, last_line)
  local bufnr = vim.api.nvim_get_current_buf()
  local client = attached_client(bufnr)
  if not client then
    notify('the language server is not attached to this buffer; see :checkhealth drtriton', vim.log.levels.WARN)
    return
  end
  local params = {
    textDocument = vim.lsp.util.make_text_document_params(bufnr),
    range = {
      start = { line = first_line - 1, character = 0 },
      ['end'] = { line = last_line - 1, character = 0 },
    },
    -- Invoked: the user asked, so the server answers for the current text even if it is still analysing an edit.
    context = { diagnostics = {}, triggerKind = vim.lsp.protocol.CodeActionTriggerKind.Invoked },
  }
  client:request('textDocument/codeAction', params, function(err, actions)
    if err then
      notify('listing code actions failed: ' .. err.message, vim.log.levels.ERROR)
      return
    end
    local ran = false
    for _, action in ipairs(actions or {}) do
      if action.command and action.command.command == server_command then
        client:exec_cmd(action.command, { bufnr = bufnr })
        ran = true
      end
    end
    if not ran then
      notify(nothing_to_run[server_command], vim.log.levels.WARN)
    end
  end, bufnr)
end

--- Runs drtriton.printDebugInformation and shows its JSON in a scratch buffer.
function M.show_debug_information()
  local client = vim.lsp.get_clients({ name = M.client_name })[1]
  if not client then
    notify('the language server is not running; see :checkhealth drtriton', vim.log.levels.WARN)
    return
  end
  local command = { title = 'drtriton debug information', command = M.server_commands.debug_information }
  client:exec_cmd(command, {}, function(err, text)
    if err then
      notify('debug information failed: ' .. err.message, vim.log.levels.ERROR)
      return
    end
    vim.cmd.new()
    local scratch = vim.api.nvim_get_current_buf()
    vim.bo[scratch].buftype = 'nofile'
    vim.bo[scratch].bufhidden = 'wipe'
    vim.bo[scratch].filetype = 'json'
    vim.api.nvim_buf_set_lines(scratch, 0, -1, false, vim.split(text, '\n'))
  end)
end

--- Stops the server and starts it again for every buffer it applies to (Neovim 0.11 has no :lsp restart).
function M.restart()
  vim.lsp.enable(M.client_name, false)
  local deadline = vim.uv.now() + RESTART_WAIT_MS
  local function start_when_stopped()
    local remaining = vim.lsp.get_clients({ name = M.client_name })
    if #remaining > 0 and vim.uv.now() < deadline then
      vim.defer_fn(start_when_stopped, 100)
      return
    end
    for _, client in ipairs(remaining) do
      client:stop(true) -- it did not exit within RESTART_WAIT_MS: force it
    end
    vim.lsp.enable(M.client_name)
  end
  start_when_stopped()
end

--- LSP MessageType (Error = 1 ... Debug = 5) to vim.log.levels.
local message_levels = {
  vim.log.levels.ERROR,
  vim.log.levels.WARN,
  vim.log.levels.INFO,
  vim.log.levels.DEBUG,
  vim.log.levels.DEBUG,
}

--- `window/showMessage`: the server's message (it starts with "drtriton: ") through vim.notify.
function M.show_message(params)
  vim.notify(params.message, message_levels[params.type] or vim.log.levels.INFO)
end

--- `window/showDocument`: drtriton's Markdown report (a `.md` file in a `drtriton-reports-*` folder) in a vertical
--- split beside the code, reusing a window that already shows it; anything else goes to Neovim's own handler.
function M.show_document(err, params, context)
  local path = vim.uri_to_fname(params.uri)
  if not (path:match('/drtriton%-reports%-[^/]+/') and path:match('%.md$')) then
    return vim.lsp.handlers['window/showDocument'](err, params, context)
  end
  local shown = vim.fn.bufwinid(vim.fn.bufnr(path))
  if shown ~= -1 then
    vim.api.nvim_set_current_win(shown)
    vim.cmd.edit()  -- the file was written again: reload it
  else
    vim.cmd.vsplit({ args = { vim.fn.fnameescape(path) }, mods = { split = 'belowright' } })
  end
  return { success = true }
end

function M.refresh_code_lenses(client_id)
  for _, bufnr in ipairs(vim.lsp.get_buffers_by_client_id(client_id)) do
    vim.lsp.codelens.refresh({ bufnr = bufnr })
  end
end

--- On attach: lenses now and after each save.
function M.on_attach(client, bufnr)
  vim.lsp.codelens.refresh({ bufnr = bufnr })
  vim.api.nvim_create_autocmd('BufWritePost', {
    group = vim.api.nvim_create_augroup('drtriton.buffer.' .. bufnr, { clear = true }),
    buffer = bufnr,
    callback = function()
      vim.lsp.codelens.refresh({ bufnr = bufnr })
    end,
  })
end

--- LspProgress handler: tracks drtriton's jobs (begin, report, end) for M.statusline() and echoes each step.
function M.on_progress(event)
  local client = vim.lsp.get_client_by_id(event.data.client_id)
  if not client or client.name ~= M.client_name then
    return
  end
  local token, value = event.data.params.token, event.data.params.value
  local target = (value.title or ''):gsub('^drtriton: ', '')
  if value.kind == 'end' then
    running_jobs[token] = nil
    local message = value.message or 'finished'
    last_result = vim.startswith(message, target .. ':') and message or (target .. ': ' .. message)
  else
    local previous = running_jobs[token]
    running_jobs[token] = { target = target, step = value.message or (previous and previous.step) or 'starting' }
    -- Steps only: the server announces the result itself (window/showMessage), and two lines would prompt.
    vim.api.nvim_echo({ { M.statusline() } }, false, {})
  end
  vim.cmd.redrawstatus()
end

--- For 'statusline': the running jobs' steps, else the last result, else ''.
function M.statusline()
  local parts = {}
  for _, job in pairs(running_jobs) do
    table.insert(parts, job.target .. ' · ' .. job.step)
  end
  if #parts > 0 then
    table.sort(parts)
    return 'drtriton: ' .. table.concat(parts, ' | ')
  end
  return last_result and ('drtriton: ' .. last_result) or ''
end

return M
