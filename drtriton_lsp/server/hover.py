"""`textDocument/hover`: the full Markdown report when the pointer rests on a target's name.

VS Code shows it in the hover popup, Neovim in the `K` floating window.
"""

from __future__ import annotations

from lsprotocol import types

from drtriton_lsp.engine.report import to_markdown
from drtriton_lsp.server.language_server import DrtritonLanguageServer, client_range


def register(server: DrtritonLanguageServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_HOVER)
    async def text_document_hover(ls: DrtritonLanguageServer, params: types.HoverParams) -> types.Hover | None:
        found = await ls.snapshot_of(params.text_document.uri)
        if found is None:
            return None
        document, analysis = found
        lines = document.lines
        for analyzed in analysis.targets:
            where = client_range(document, lines, analyzed.target.name_span)
            if where.start.line != params.position.line:
                continue
            if not where.start.character <= params.position.character <= where.end.character:
                continue
            result = ls.results.current(analysis, analyzed.target.name)
            if result is None:
                return None
            text = to_markdown(result.report) if result.report else f"**drtriton**: failed: {result.error}\n"
            return types.Hover(contents=_markup(ls, text), range=where)
        return None


def _markup(ls: DrtritonLanguageServer, markdown: str) -> types.MarkupContent:
    formats = getattr(getattr(ls.client_capabilities.text_document, "hover", None), "content_format", None) or []
    if formats and types.MarkupKind.Markdown not in formats:
        return types.MarkupContent(kind=types.MarkupKind.PlainText, value=markdown)
    return types.MarkupContent(kind=types.MarkupKind.Markdown, value=markdown)
