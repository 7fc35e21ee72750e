"""`textDocument/didOpen|didChange|didSave|didClose`: background analysis, on-save hints and the optional search.

Hints show as Hint diagnostics (VS Code: faded dots under the chain; Neovim: hint signs).
"""

from __future__ import annotations

import asyncio

from lsprotocol import types

from drtriton_lsp.server.generate import request_generate
from drtriton_lsp.server.language_server import DrtritonLanguageServer

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
            ls.in_background(start_background_search(ls, uri))

    def forget(self, uri: str) -> None:
        if uri in self._pending:
            self._pending.pop(uri).cancel()


def update_fusion_hints(ls: DrtritonLanguageServer, uri: str) -> None:
    """onSave = hint | search: publish the fusible chains of the analysis (made in the analysis process).

    onSave = off publishes nothing, except once to clear the hints an earlier save published.
    """
    if ls.settings.onSave == "off":
        if uri in ls.hinted_documents:
            ls.hinted_documents.discard(uri)
            ls.publish_diagnostics(uri)
        return
    ls.hinted_documents.add(uri)
    ls.publish_diagnostics(uri)


async def start_background_search(ls: DrtritonLanguageServer, uri: str) -> None:
    """onSave = search: a generate job for each target with inputs and no current result; where a job still runs
    on the target (for older text), one more search once it ends, for whatever the text is then."""
    if ls.settings.onSave != "search":
        return
    found = await ls.analysis_of(uri)
    if found is None:
        return
    _, analysis = found
    for analyzed in analysis.targets:
        name = analyzed.target.name
        if analyzed.inputs.available and ls.results.current(analysis, name) is None:
            answer = await request_generate(ls, uri, name, quiet=True)
            if answer["status"] == "already running":
                ls.jobs.after_running_job(uri, name, lambda: start_background_search(ls, uri))


def register(server: DrtritonLanguageServer) -> None:
    debouncer = SaveDebouncer()

    @server.feature(types.TEXT_DOCUMENT_DID_OPEN)
    def text_document_did_open(ls: DrtritonLanguageServer, params: types.DidOpenTextDocumentParams) -> None:
        ls.analyses.document_opened(params.text_document.uri)
        debouncer.schedule(ls, params.text_document.uri, search=False)

    @server.feature(types.TEXT_DOCUMENT_DID_CHANGE)
    def text_document_did_change(ls: DrtritonLanguageServer, params: types.DidChangeTextDocumentParams) -> None:
        ls.analyses.document_changed(params.text_document.uri)

    @server.feature(types.TEXT_DOCUMENT_DID_SAVE, types.SaveOptions(include_text=False))
    def text_document_did_save(ls: DrtritonLanguageServer, params: types.DidSaveTextDocumentParams) -> None:
        debouncer.schedule(ls, params.text_document.uri, search=ls.settings.onSave == "search")

    @server.feature(types.TEXT_DOCUMENT_DID_CLOSE)
    def text_document_did_close(ls: DrtritonLanguageServer, params: types.DidCloseTextDocumentParams) -> None:
        uri = params.text_document.uri
        debouncer.forget(uri)
        ls.analyses.forget(uri)
        ls.hinted_documents.discard(uri)
        ls.provisional_lenses.discard(uri)
        ls.reported_large_documents.discard(uri)
        ls.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=[]))
