-- drtriton's language server config for Neovim 0.11+, found by vim.lsp.config and started by vim.lsp.enable('drtriton').
-- Override any field with vim.lsp.config('drtriton', { ... }); the settings are documented in drtriton's docs/settings.md.

---@type vim.lsp.Config
return {
  cmd = { 'drtriton-lsp' },
  filetypes = { 'python' },
  root_markers = { 'pyproject.toml', 'setup.py', 'setup.cfg', '.git' },
  -- Answered to the server's `workspace/configuration` request (section "drtriton"), e.g. { drtriton = { device = 'cpu' } };
  -- a model beside the compiler: { drtriton = { model = { backend = 'openai', endpoint = 'http://localhost:8000/v1' } } }.
  settings = { drtriton = {} },
  -- Neovim 0.11 does not answer `workspace/codeLens/refresh` by itself; the handler below does, so the lens
  -- changes when a job starts and when it ends.
  capabilities = { workspace = { codeLens = { refreshSupport = true } } },
  handlers = {
    ['workspace/codeLens/refresh'] = function(_, _, context)
      require('drtriton').refresh_code_lenses(context.client_id)
      return vim.NIL
    end,
    -- Neovim 0.11 echoes these with a trailing newline, which stops at a hit-enter prompt after every job;
    -- vim.notify shows them on one line, or through whichever notification plugin is installed.
    ['window/showMessage'] = function(_, params)
      require('drtriton').show_message(params)
    end,
    -- A report opens in a split beside the code instead of replacing it; other documents as Neovim opens them.
    ['window/showDocument'] = function(err, params, context)
      return require('drtriton').show_document(err, params, context)
    end,
  },
}
