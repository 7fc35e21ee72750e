"""`workspace/executeCommand` drtriton.showReport: the target's Markdown report, returned and opened.

Written to `<file stem>.<target>.md` (with its timing chart as .svg beside it) in a private folder per source file,
and opened with `window/showDocument` where the editor supports it; the editor clients open it beside the code.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from urllib.parse import unquote
from typing import Any

from lsprotocol import types
from pygls.uris import from_fs_path

from drtriton_lsp.engine.report import to_markdown
from drtriton_lsp.engine.report_chart import timing_chart
from drtriton_lsp.server.language_server import DrtritonLanguageServer, target_from_arguments

SHOW_REPORT = "drtriton.showReport"
# per user and private: a report shows the user's code
REPORT_FOLDER = Path(tempfile.gettempdir()) / f"drtriton-reports-{os.getuid() if hasattr(os, 'getuid') else 'user'}"


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
        path = report_path(target[0], result.target_name)
        chart = timing_chart(result.report) if result.report else None
        path.with_suffix(".svg").unlink(missing_ok=True)  # an earlier run's chart
        if chart is not None:
            path.with_suffix(".svg").write_text(chart, encoding="utf-8")
            markdown += f"\n![time per call: eager, torch.compile and Triton]({path.with_suffix('.svg').name})\n"
        path.write_text(markdown, encoding="utf-8")
        uri = from_fs_path(str(path))
        if ls.client_supports("window", "show_document", "support"):
            await ls.window_show_document_async(types.ShowDocumentParams(uri=uri, take_focus=True))
        return {"markdown": markdown, "uri": uri}


def report_path(document_uri: str, target_name: str) -> Path:
    """`<private folder>/<hash of the document>/<file stem>.<target>.md`: one report per file and target."""
    folder = REPORT_FOLDER / hashlib.sha256(document_uri.encode()).hexdigest()[:12]
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    REPORT_FOLDER.chmod(0o700)
    stem = Path(unquote(document_uri.rsplit("/", 1)[-1])).stem or "untitled"
    return folder / f"{stem}.{target_name}.md"
