"""`textDocument/didOpen|didSave|didClose`: the on-save analysis (debounced) and the optional background search.

Editors show its results as Hint diagnostics (VS Code: faded dots under the chain; Neovim: hint signs).
"""

from __future__ import annotations

import ast
import asyncio

from lsprotocol import types

from drtriton_lsp.server.analysis import client_range
from drtriton_lsp.server.fusion_hints import fusible_chains
from drtriton_lsp.server.generate import request_generate
from drtriton_lsp.server.language_server import SOURCE, DrtritonLanguageServer

DEBOUNCE_S = 0.3


class SaveDebouncer:
    """Runs the on-save work once per burst of saves (auto-save can fire many in a row)."""

    def __init__(self) -> None:
        self._pending: dict[str, asyncio.TimerHandle] = {}

    def schedule(self, ls: DrtritonLanguageServer, uri: str, *, search: bool) -> None:
        if uri in self._pending:
            self._pending[uri].cancel()
        loop = asyncio.get_running_loop()
        self._pending[uri] = loop.call_later(DEBOUNCE_S, lambda: self._run(ls, uri, search))

    def _run(self, ls: DrtritonLanguageServer, uri: str, search: bool) -> None:
        self._pending.pop(uri, None)
        update_fusion_hints(ls, uri)
        if search:
            asyncio.ensure_future(start_background_search(ls, uri))

    def forget(self, uri: str) -> None:
        if uri in self._pending:
            self._pending.pop(uri).cancel()


def update_fusion_hints(ls: DrtritonLanguageServer, uri: str) -> None:
    found = ls.analysis_of(uri)
    if found is None:
        return
    document, analysis = found
    hints: list[types.Diagnostic] = []
    if analysis.problem is None and ls.settings.onSave != "off":
        tree = ast.parse(document.source)
        lines = document.lines
        hints = [
            types.Diagnostic(
                range=client_range(document, lines, chain.span),
                message=chain.message,
                severity=types.DiagnosticSeverity.Hint,
                source=SOURCE,
            )
            for chain in fusible_chains(tree, [analyzed.target for analyzed in analysis.targets])
        ]
    elif analysis.problem is not None:
        hints = ls.fusion_hints.get(uri, [])  # mid-typing syntax error: keep the last hints until it parses
    ls.fusion_hints[uri] = hints
    ls.publish_diagnostics(uri)


async def start_background_search(ls: DrtritonLanguageServer, uri: str) -> None:
    """onSave = search: a generate job for each target with inputs, no current result and no job."""
    found = ls.analysis_of(uri)
    if found is None:
        return
    _, analysis = found
    for analyzed in analysis.targets:
        name = analyzed.target.name
        if analyzed.inputs.available and ls.results.current(analysis, name) is None:
            await request_generate(ls, uri, name, quiet=True)


def register(server: DrtritonLanguageServer) -> None:
    debouncer = SaveDebouncer()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def text_document_did_open(ls: DrtritonLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        debouncer.schedule(ls, params.text_document.uri, search=False)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def text_document_did_save(ls: DrtritonLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
        debouncer.schedule(ls, params.text_document.uri, search=ls.settings.onSave == "search")

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def text_document_did_close(ls: DrtritonLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        debouncer.forget(uri)
        ls.analyses.forget(uri)
        ls.fusion_hints.pop(uri, None)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
