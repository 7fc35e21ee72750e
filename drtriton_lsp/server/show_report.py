"""`workspace/executeCommand` drtriton.showReport: the target's Markdown report, returned and opened.

The report is written to a temporary .md file and opened with `window/showDocument` where the editor supports it.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.uris import from_fs_path

from drtriton_lsp.engine.report import to_markdown
from drtriton_lsp.server.language_server import DrtritonLanguageServer, target_from_arguments

SHOW_REPORT = "drtriton.showReport"
REPORT_FOLDER = Path(tempfile.gettempdir()) / "drtriton-reports"


def register(server: DrtritonLanguageServer) -> None:
    @server.command(SHOW_REPORT)
    async def show_report(ls: DrtritonLanguageServer, *arguments: Any) -> dict[str, Any]:
        target = target_from_arguments(arguments)
        found = await ls.analysis_of(target[0]) if target is not None else None
        result = ls.results.current(found[1], target[1]) if found is not None else None
        if result is None:
            message = "no report for this target yet; run 'drtriton: Generate Triton kernel' first"
            ls.tell(message, types.MessageType.Warning)
            return {"markdown": None, "message": message}
        markdown = to_markdown(result.report) if result.report else f"## drtriton: `{result.target_name}`\n\nfailed: {result.error}\n"
        REPORT_FOLDER.mkdir(parents=True, exist_ok=True)
        path = REPORT_FOLDER / f"{result.target_name}.md"
        path.write_text(markdown, encoding="utf-8")
        uri = from_fs_path(str(path))
        if ls.client_supports("window", "show_document", "support"):
            await ls.window_show_document_async(types.ShowDocumentParams(uri=uri, take_focus=True))
        return {"markdown": markdown, "uri": uri}
