"""`textDocument/inlayHint`: each target with a result shows its verdict in brief at the end of its header line.

Answered at once from the newest analysis and the stored results (no code runs); refreshed whenever the lenses are.
Brief, because Neovim draws the lens (the whole verdict) on the same line; the tooltip has the whole verdict.
"""

from __future__ import annotations

from lsprotocol import types

from drtriton_lsp.server.code_lens import lens_title
from drtriton_lsp.server.language_server import DrtritonLanguageServer, client_range
from drtriton_lsp.server.results import TargetResult
from drtriton_lsp.source.targets import SourceSpan


def register(server: DrtritonLanguageServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_INLAY_HINT, types.InlayHintOptions(resolve_provider=False))
    async def text_document_inlay_hint(
        ls: DrtritonLanguageServer, params: types.InlayHintParams
    ) -> list[types.InlayHint] | None:
        uri = params.text_document.uri
        found = await ls.result_view_snapshot(uri)
        if found is None:
            return None
        document, analysis = found
        lines = document.lines
        hints = []
        for analyzed in analysis.targets:
            result = ls.results.current(analysis, analyzed.target.name)
            line_number = analyzed.target.name_span.start_line  # 1-based: the `class`/`def` line
            if result is None or not params.range.start.line <= line_number - 1 <= params.range.end.line:
                continue
            end = len(lines[line_number - 1].rstrip("\r\n")) if line_number <= len(lines) else 0
            where = client_range(document, lines, SourceSpan(line_number, end, line_number, end))
            hints.append(
                types.InlayHint(
                    position=where.start,
                    label=f"drtriton: {verdict_in_brief(result)}",
                    padding_left=True,
                    tooltip=f"{lens_title(result)} (the code lens opens the whole report)",
                )
            )
        return hints


def verdict_in_brief(result: TargetResult) -> str:
    """The verdict, and the speedup over eager when one was measured: "verified · 2.41x vs eager", "failed"."""
    parts = lens_title(result).split(" · ")
    report = result.report
    if report is not None and report["status"] == "verified" and report.get("timing"):
        return " · ".join(parts[:2])
    return parts[0].split(":")[0]
