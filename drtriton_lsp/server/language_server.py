"""The server object: shared state (settings, analyses, results, jobs) and the helpers every feature uses.

`build_server()` creates it and lets each feature module register its LSP methods on it.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Callable, Coroutine
from urllib.parse import unquote

from lsprotocol import types
from pygls.exceptions import FeatureRequestError
from pygls.lsp.server import LanguageServer
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from drtriton_lsp import __version__
from drtriton_lsp.engine.report import one_line
from drtriton_lsp.server.analysis import DocumentAnalysis, DocumentTooLarge
from drtriton_lsp.server.background_analysis import BackgroundAnalysis
from drtriton_lsp.server.jobs import JobManager
from drtriton_lsp.server.malformed_messages import AnsweringProtocol, log_out_of_band_error
from drtriton_lsp.server.results import ResultStore
from drtriton_lsp.server.settings import Settings
from drtriton_lsp.source.targets import SourceSpan

logger = logging.getLogger(__name__)
SOURCE = "drtriton"


class DrtritonLanguageServer(LanguageServer):
    """pygls's server plus drtriton's state. Every attribute is touched only on the event loop's thread;
    job threads reach it through `call_from_thread`."""

    def __init__(self) -> None:
        super().__init__(
            "drtriton-lsp",
            __version__,
            protocol_cls=AnsweringProtocol,
            text_document_sync_kind=types.TextDocumentSyncKind.Incremental,
        )
        self.settings = Settings()
        self.initialization_options: Any = None
        self.reported_setting_problems: set[str] = set()
        self.settings_pushes = 0  # didChangeConfiguration notifications that carried settings
        self.reported_large_documents: set[str] = set()
        self.analyses = BackgroundAnalysis(self.open_document, self.document_analyzed)
        self.results = ResultStore()
        self.hinted_documents: set[str] = set()  # saved with onSave = hint | search: their fusion hints are shown
        self.provisional_lenses: set[str] = set()  # lenses answered from a carried-over analysis since the last one
        self.loop: asyncio.AbstractEventLoop | None = None
        self.jobs = JobManager(self)
        self._background_tasks: set[asyncio.Task] = set()

    def open_document(self, uri: str) -> TextDocument | None:
        """The editor's copy of an open document; None for a document the editor has not opened."""
        return self.workspace.text_documents.get(unquote(uri))

    async def snapshot_of(self, uri: str) -> tuple[TextDocument, DocumentAnalysis] | None:
        """For requests that must answer at once (lenses, hovers, code actions): the newest analysis carried over
        to the current text, where targets touched by unanalysed edits show no result. Waits only for the first."""
        while True:
            document = self.open_document(uri)
            if document is None:
                return None
            analysis = self.analyses.snapshot(document)
            if analysis is not None:
                return document, analysis
            if await self.analyses.current(uri) is None:
                return None

    async def result_view_snapshot(self, uri: str) -> tuple[TextDocument, DocumentAnalysis] | None:
        """`snapshot_of`, for the views that show results (lenses): when the analysis was carried over
        to newer text, the views are refreshed once the new text is analyzed (see document_analyzed)."""
        found = await self.snapshot_of(uri)
        if found is not None and found[1].carried_over_from is not None:
            self.provisional_lenses.add(uri)
        return found

    async def analysis_of(self, uri: str) -> tuple[TextDocument, DocumentAnalysis] | None:
        """For commands that act on the text (generate, verify, apply): the analysis of exactly the current version."""
        return await self.analyses.current(uri)

    def document_analyzed(self, analysis: DocumentAnalysis) -> None:
        """A fresh analysis: results for changed text are dropped, and what the editor shows is brought up to date."""
        document = self.open_document(analysis.uri)
        if document is None or document.version != analysis.version:
            return  # the user typed on: the analysis of the newer text follows
        uri = analysis.uri
        if isinstance(analysis.problem, DocumentTooLarge) and uri not in self.reported_large_documents:
            self.reported_large_documents.add(uri)
            self.tell(f"{analysis.problem.message}. {analysis.problem.hint}", types.MessageType.Warning)
        dropped = self.results.drop_stale(analysis)
        if dropped or self.results.for_document(analysis):  # results that stay follow their targets' lines
            self.publish_diagnostics(uri)
        if dropped or uri in self.provisional_lenses:
            self.provisional_lenses.discard(uri)
            self.refresh_result_views()

    def in_background(self, work: Coroutine[Any, Any, Any]) -> None:
        """Run `work` on the event loop without waiting for it; held until done (asyncio keeps only weak
        references to tasks), and a failure is logged rather than lost."""
        task = asyncio.ensure_future(work)
        self._background_tasks.add(task)
        task.add_done_callback(self._background_task_done)

    def _background_task_done(self, task: asyncio.Task) -> None:
        self._background_tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            logger.error("background work failed", exc_info=task.exception())

    def report_server_error(self, error: Exception, source) -> None:
        """pygls's hook for errors: a request's error is already in its answer; any other goes to the log."""
        if source is not FeatureRequestError:
            log_out_of_band_error(self, error)

    def tell(self, message: str, kind: types.MessageType = types.MessageType.Info) -> None:
        """A `window/showMessage` notification: a toast in VS Code, the message area in Neovim."""
        self.window_show_message(types.ShowMessageParams(type=kind, message=f"drtriton: {message}"))

    def log(self, message: str, kind: types.MessageType = types.MessageType.Log) -> None:
        self.window_log_message(types.LogMessageParams(type=kind, message=message))

    def call_from_thread(self, function: Callable[..., None], *arguments: Any) -> None:
        """Run `function` on the event loop; a job thread's only way to touch server state."""
        if self.loop is None or self.loop.is_closed():
            return
        try:
            self.loop.call_soon_threadsafe(function, *arguments)
        except RuntimeError:
            logger.debug("the event loop closed before a job's update could be delivered")

    def client_supports(self, *path: str) -> bool:
        """Whether a (nested, snake_case) client capability is present and truthy."""
        value: Any = self.client_capabilities
        for name in path:
            value = getattr(value, name, None)
            if value is None:
                return False
        return bool(value)

    def publish_diagnostics(self, uri: str) -> None:
        """Publish, once the current text is analysed: fusion hints (after a save with onSave on) plus one
        diagnostic per target with a current result: Information on the target's line for a verified kernel, a
        Warning with what to do for a failure, on the line it names (an untraceable branch) where it names one."""
        self.in_background(self._publish_diagnostics(uri))

    async def _publish_diagnostics(self, uri: str) -> None:
        found = await self.analysis_of(uri)
        if found is None:
            return
        document, analysis = found
        if analysis.problem is not None:  # a syntax error mid-typing: the last analysis that parsed, carried over
            analysis = self.analyses.snapshot(document) or analysis
        lines = document.lines
        diagnostics = []
        if uri in self.hinted_documents:
            diagnostics += [
                types.Diagnostic(
                    range=client_range(document, lines, chain.span),
                    message=chain.message,
                    severity=types.DiagnosticSeverity.Hint,
                    source=SOURCE,
                )
                for chain in analysis.fusible_chains
            ]
        for result in self.results.for_document(analysis):
            analyzed = analysis.target_named(result.target_name)
            where = analyzed.target.name_span
            if result.report is not None:
                message = one_line(result.report)
                verified = result.report["status"] == "verified"
            else:
                message = f"{result.target_name}: failed · {result.error}" + (f" {result.hint}" if result.hint else "")
                verified = False
                line = where.start_line + result.problem_offset if result.problem_offset is not None else 0
                if 1 <= line <= len(lines):
                    text = lines[line - 1].rstrip("\r\n")
                    indent = len(text) - len(text.lstrip())
                    where = SourceSpan(line, indent, line, len(text))
            diagnostics.append(
                types.Diagnostic(
                    range=client_range(document, lines, where),
                    message=message,
                    severity=types.DiagnosticSeverity.Information if verified else types.DiagnosticSeverity.Warning,
                    source=SOURCE,
                )
            )
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=diagnostics))

    def document_edit(self, document: TextDocument, edits: list[types.TextEdit]) -> types.WorkspaceEdit:
        """One undoable edit of one document, tied to the version it was computed for when the editor allows."""
        if self.client_supports("workspace", "workspace_edit", "document_changes"):
            identifier = types.OptionalVersionedTextDocumentIdentifier(uri=document.uri, version=document.version)
            return types.WorkspaceEdit(document_changes=[types.TextDocumentEdit(text_document=identifier, edits=edits)])
        return types.WorkspaceEdit(changes={document.uri: edits})

    def refresh_result_views(self) -> None:
        """Ask the editor to request lenses again (where it supports the refresh request)."""
        if self.client_supports("workspace", "code_lens", "refresh_support"):
            self.workspace_code_lens_refresh(None)


def client_range(document: TextDocument, lines: list[str], span: SourceSpan) -> types.Range:
    """An engine span (1-based lines, character columns) as an LSP range in the client's position encoding.

    lines: `document.lines`, read once per request (it splits the whole text on every access).
    """
    server_range = ServerTextRange(
        ServerTextPosition(span.start_line - 1, span.start_column),
        ServerTextPosition(span.end_line - 1, span.end_column),
    )
    return document.position_codec.range_to_client_units(lines, server_range)


def target_arguments(uri: str, target_name: str) -> list[dict[str, str]]:
    """The arguments every drtriton command takes: which document, which target."""
    return [{"uri": uri, "target": target_name}]


def target_from_arguments(arguments: tuple[Any, ...]) -> tuple[str, str] | None:
    """(uri, target name) from a command's `[{"uri": ..., "target": ...}]` arguments; None if malformed."""
    if len(arguments) == 1 and isinstance(arguments[0], dict):
        uri, target = arguments[0].get("uri"), arguments[0].get("target")
        if isinstance(uri, str) and isinstance(target, str):
            return uri, target
    return None


def build_server() -> DrtritonLanguageServer:
    """A server with every feature registered (one module per LSP feature)."""
    from drtriton_lsp.server import (
        apply_kernel,
        code_actions,
        code_lens,
        configuration,
        debug_information,
        document_sync,
        generate,
        hover,
        show_report,
        verify_and_benchmark,
    )

    server = DrtritonLanguageServer()
    for feature in (
        configuration,
        document_sync,
        code_actions,
        code_lens,
        hover,
        generate,
        verify_and_benchmark,
        apply_kernel,
        show_report,
        debug_information,
    ):
        feature.register(server)
    return server
