"""The drtriton language server (pygls): code actions, jobs with progress, lenses, hovers, diagnostics.

One module per LSP feature; `language_server.py` holds the shared state, `main.py` starts it.
"""
