-- The Neovim flow a user goes through, run by test_nvim_end_to_end.py in a headless Neovim 0.11 with the plugin.
-- Opens $DRTRITON_E2E_FILE, generates, verifies again, applies, reads lenses; writes what it saw to
-- $DRTRITON_E2E_RESULTS as JSON.

local TARGET = os.getenv('DRTRITON_E2E_TARGET')
local DECORATOR = '^%s*@drtriton_dispatch%('
local results = { steps = {} }
local started = vim.uv.hrtime()

--- One line of the recorded run, on stdout, with the seconds since the start.
local function say(text)
  io.stdout:write(('[%6.1fs] %s\n'):format((vim.uv.hrtime() - started) / 1e9, text))
  io.stdout:flush()
  table.insert(results.steps, text)
end

local function wait_for(what, timeout_ms, condition)
  if not vim.wait(timeout_ms, condition, 100) then
    error(('timed out after %d s waiting for %s'):format(timeout_ms / 1000, what), 0)
  end
end

local function drtriton_client()
  return vim.lsp.get_clients({ bufnr = 0, name = 'drtriton' })[1]
end

--- The code lenses as Neovim draws them: end-of-line virtual text, by 0-based line.
local function lens_texts(bufnr)
  local lenses = {}
  for _, mark in ipairs(vim.api.nvim_buf_get_extmarks(bufnr, -1, 0, -1, { details = true })) do
    local details = mark[4]
    if details.virt_text and details.virt_text_pos == 'eol' then
      local text = table.concat(vim.tbl_map(function(chunk)
        return chunk[1]
      end, details.virt_text))
      table.insert(lenses, { line = mark[2], text = vim.trim(text) })
    end
  end
  return lenses
end

local function lens_containing(bufnr, fragment)
  for _, lens in ipairs(lens_texts(bufnr)) do
    if lens.text:find(fragment, 1, true) then
      return lens
    end
  end
  return nil
end

local function find_line(bufnr, pattern)
  for number, line in ipairs(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)) do
    if line:match(pattern) then
      return number
    end
  end
  error('no line matches ' .. pattern, 0)
end

local progress = {}
vim.api.nvim_create_autocmd('LspProgress', {
  callback = function(event)
    local value = event.data.params.value
    table.insert(progress, { kind = value.kind, title = value.title, message = value.message })
    say(('$/progress %s: %s'):format(value.kind, value.message or value.title or ''))
  end,
})

local function ended_jobs()
  return #vim.tbl_filter(function(event)
    return event.kind == 'end'
  end, progress)
end

local notified = {}
local notify = vim.notify
vim.notify = function(message, level)
  table.insert(notified, { message = message, level = level })
  notify(message, level)
end

local function flow()
  vim.lsp.config('drtriton', { settings = { drtriton = { device = 'cpu', trials = 2 } } })
  vim.lsp.enable('drtriton')
  vim.cmd.edit(vim.fn.fnameescape(os.getenv('DRTRITON_E2E_FILE')))
  local bufnr = vim.api.nvim_get_current_buf()
  say(':edit ' .. vim.fn.expand('%:t'))
  vim.lsp.inlay_hint.enable(true, { bufnr = bufnr })  -- as a user with other servers' hints on has them

  wait_for('the drtriton client to attach', 30000, function()
    return drtriton_client() ~= nil and drtriton_client().initialized
  end)
  local client = drtriton_client()
  results.first_client_id = client.id
  say(('drtriton-lsp attached (client %d)'):format(client.id))

  wait_for('the first code lens', 15000, function()
    return lens_containing(bufnr, 'Generate Triton kernel') ~= nil
  end)
  results.lenses_on_open = lens_texts(bufnr)
  say('lens: ' .. lens_containing(bufnr, 'Generate Triton kernel').text)

  local target_line = find_line(bufnr, '^class ' .. TARGET .. '%W')
  vim.api.nvim_win_set_cursor(0, { target_line, 0 })
  local listed = client:request_sync('textDocument/codeAction', {
    textDocument = vim.lsp.util.make_text_document_params(bufnr),
    range = { start = { line = target_line - 1, character = 0 }, ['end'] = { line = target_line - 1, character = 0 } },
    context = { diagnostics = {}, triggerKind = vim.lsp.protocol.CodeActionTriggerKind.Invoked },
  }, 10000, bufnr)
  results.code_actions = vim.tbl_map(function(action)
    return action.title
  end, listed.result or {})
  for _, title in ipairs(results.code_actions) do
    say('code action: ' .. title)
  end

  say(':DrtritonGenerate')
  vim.cmd('DrtritonGenerate')
  wait_for('the generate job to end', 300000, function()
    return ended_jobs() == 1
  end)
  results.progress = progress

  wait_for('the lens with the result', 15000, function()
    return lens_containing(bufnr, 'verified') ~= nil
  end)
  results.lenses_after_generate = lens_texts(bufnr)
  for _, lens in ipairs(results.lenses_after_generate) do
    say(('lens on line %d: %s'):format(lens.line + 1, lens.text))
  end
  results.diagnostics = vim.tbl_map(function(diagnostic)
    return diagnostic.message
  end, vim.diagnostic.get(bufnr, { severity = vim.diagnostic.severity.INFO }))
  results.notifications = notified
  results.statusline = require('drtriton').statusline()
  say('statusline: ' .. results.statusline)

  say(':DrtritonShowReport')
  vim.cmd('DrtritonShowReport')
  wait_for('the report to open', 15000, function()
    return vim.api.nvim_get_current_buf() ~= bufnr
  end)
  results.report_name = vim.fn.expand('%:t')
  results.report_first_line = vim.api.nvim_buf_get_lines(0, 0, 1, false)[1]
  results.windows_with_report = #vim.api.nvim_tabpage_list_wins(0)
  results.code_still_shown = vim.fn.bufwinid(bufnr) ~= -1
  say(('report opened: %s, "%s", beside the code: %s'):format(
    results.report_name, results.report_first_line, tostring(results.code_still_shown)))
  vim.cmd.close()  -- the report's split; back in the code's window

  vim.api.nvim_win_set_cursor(0, { target_line, 0 })
  say(':DrtritonVerify')
  vim.cmd('DrtritonVerify')
  wait_for('the verify job to end', 120000, function()
    return ended_jobs() == 2
  end)
  results.verify_job_end = progress[#progress].message
  wait_for('the lens with the re-verified result', 15000, function()
    return lens_containing(bufnr, 're-verified') ~= nil
  end)
  results.lenses_after_verify = lens_texts(bufnr)
  say('lens: ' .. lens_containing(bufnr, 're-verified').text)
  -- the verdict once per target line: the lens (the server offers no inlay hint repeating it)
  results.inlay_hints_after_verify = #vim.lsp.inlay_hint.get({ bufnr = bufnr })
  results.inlay_hints_enabled = vim.lsp.inlay_hint.is_enabled({ bufnr = bufnr })

  say(':DrtritonApply')
  vim.cmd('DrtritonApply')
  wait_for('the kernel to be written into the buffer', 30000, function()
    return vim.iter(vim.api.nvim_buf_get_lines(bufnr, 0, -1, false)):any(function(line)
      return line:match(DECORATOR) ~= nil
    end)
  end)
  vim.cmd.write()
  say(('applied and saved: %d lines, decorator on line %d'):format(
    vim.api.nvim_buf_line_count(bufnr),
    find_line(bufnr, DECORATOR)
  ))

  local moved_line = find_line(bufnr, '^class ' .. TARGET .. '%W')
  wait_for('the applied lens on the moved target (refreshed on save)', 30000, function()
    local lens = lens_containing(bufnr, 'kernel applied')
    return lens ~= nil and lens.line == moved_line - 1
  end)
  results.applied_lens = lens_containing(bufnr, 'kernel applied').text
  say('lens: ' .. results.applied_lens)
  vim.api.nvim_win_set_cursor(0, { moved_line, 0 })
  say(':DrtritonVerify on the applied kernel, then :DrtritonCancel once it runs')
  local began = #progress
  vim.cmd('DrtritonVerify')
  wait_for('the third job to begin', 30000, function()
    return #progress > began
  end)
  vim.cmd('DrtritonVerify')  -- again, while it runs
  wait_for('the second Verify to be answered', 15000, function()
    return #notified > 0 and notified[#notified].message:find('already running', 1, true) ~= nil
  end)
  results.command_while_running = notified[#notified].message
  vim.cmd('DrtritonCancel')
  wait_for('the third job to end', 60000, function()
    return ended_jobs() == 3
  end)
  results.cancelled_job_end = progress[#progress].message

  vim.cmd('checkhealth drtriton')
  results.health = vim.api.nvim_buf_get_lines(0, 0, -1, false)
  for _, line in ipairs(results.health) do
    if line:match('^%- ') then
      say(':checkhealth ' .. line)
    end
  end
  vim.cmd.tabclose()

  say(':DrtritonDebugInformation')
  vim.cmd('DrtritonDebugInformation')
  wait_for('the debug information', 120000, function()
    return vim.bo.filetype == 'json'
  end)
  results.debug_information = vim.json.decode(table.concat(vim.api.nvim_buf_get_lines(0, 0, -1, false), '\n'))
  say('debug information: drtriton-lsp ' .. results.debug_information.versions['drtriton-lsp'])
  vim.cmd.close()

  say(':DrtritonRestart')
  vim.cmd('DrtritonRestart')
  wait_for('a new drtriton client after the restart', 30000, function()
    local restarted = drtriton_client()
    return restarted ~= nil and restarted.id ~= results.first_client_id and restarted.initialized
  end)
  results.restarted_client_id = drtriton_client().id
  say(('drtriton-lsp restarted (client %d)'):format(results.restarted_client_id))
end

--- Runs after start-up, as a user's commands do (vim.lsp.enable re-attaches open buffers only once Neovim has entered).
local function run_and_quit()
  local ok, problem = pcall(flow)
  if not ok then
    results.error = tostring(problem)
    say('FAILED: ' .. results.error)
  end
  local output = assert(io.open(os.getenv('DRTRITON_E2E_RESULTS'), 'w'))
  output:write(vim.json.encode(results))
  output:close()
  vim.cmd('qall!')
end

vim.api.nvim_create_autocmd('VimEnter', { once = true, callback = vim.schedule_wrap(run_and_quit) })
