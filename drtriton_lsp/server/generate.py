"""`workspace/executeCommand` drtriton.generate and drtriton.cancel, and `window/workDoneProgress/cancel`.

Generate starts a job and answers at once; editors show the job as a progress bar (VS Code: a cancellable
notification; Neovim: `LspProgress` events, e.g. in the status line) and its result as a lens and diagnostic.
Cancel stops a job of any kind (generate, verify, benchmark).
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types
from pygls.workspace import TextDocument

from drtriton_lsp.server.analysis import DocumentAnalysis
from drtriton_lsp.server.jobs import JobInput
from drtriton_lsp.server.language_server import DrtritonLanguageServer, target_from_arguments

GENERATE = "drtriton.generate"
CANCEL = "drtriton.cancel"


async def request_generate(ls: DrtritonLanguageServer, uri: str, target_name: str, *, quiet: bool = False) -> dict[str, Any]:
    """Start a generate job for the target unless something stands in the way; every refusal is said plainly.

    quiet: refusals are only returned, not shown (background jobs started on save).
    """
    return await ls.jobs.request(uri, target_name, "generate", await _refusal(ls, uri, target_name), quiet=quiet)


async def open_target(ls: DrtritonLanguageServer, uri: str, target_name: str) -> str | tuple[TextDocument, DocumentAnalysis]:
    """Why no job can run on the target (a message), or the document and the analysis of its current text."""
    found = await ls.analysis_of(uri)
    if found is None:
        return f"{uri} is not open in the editor; open it and try again"
    document, analysis = found
    if analysis.problem is not None:
        return f"{analysis.problem.message}. {analysis.problem.hint}"
    if analysis.path is None:
        return f"drtriton runs jobs on files on disk, and {uri} is not one; save it as a .py file first"
    if analysis.target_named(target_name) is None:
        names = ", ".join(entry.target.name for entry in analysis.targets) or "none"
        return f"no target named {target_name} in this file (targets: {names})"
    return document, analysis


async def _refusal(ls: DrtritonLanguageServer, uri: str, target_name: str) -> str | JobInput:
    """Why a job cannot start (a message), or the snapshot it will work on (the text of the current version)."""
    found = await open_target(ls, uri, target_name)
    if isinstance(found, str):
        return found
    document, analysis = found
    analyzed = analysis.target_named(target_name)
    if not analyzed.inputs.available:
        problem = analyzed.inputs.problem
        return f"{problem.message} Use the quick fix 'drtriton: Add example-input pragma' on {target_name}, then fill it in."
    return JobInput(
        text=document.source,
        version=document.version,
        path=analysis.path,
        text_hash=analyzed.text_hash,
        settings=ls.settings,
        target_line=analyzed.target.name_span.start_line,
    )


def register(server: DrtritonLanguageServer) -> None:
    @server.command(GENERATE)
    async def generate(ls: DrtritonLanguageServer, *arguments: Any) -> dict[str, Any]:
        target = target_from_arguments(arguments)
        if target is None:
            return {"status": "refused", "message": "drtriton.generate takes one argument: {uri, target}"}
        return await request_generate(ls, *target)

    @server.command(CANCEL)
    def cancel(ls: DrtritonLanguageServer, *arguments: Any) -> dict[str, Any]:
        """Arguments: a job id, {"jobId": id}, or {uri, target} (the running job for that target)."""
        job = None
        if arguments and isinstance(arguments[0], (str, int)):
            job = ls.jobs.jobs.get(str(arguments[0]))
        elif arguments and isinstance(arguments[0], dict) and "jobId" in arguments[0]:
            job = ls.jobs.jobs.get(str(arguments[0]["jobId"]))
        elif (target := target_from_arguments(arguments)) is not None:
            job = ls.jobs.running_for(*target)
        if job is None or job.state != "running":
            return {"cancelled": False, "message": "no such running job"}
        ls.jobs.cancel(job)
        return {"cancelled": True, "jobId": job.id}

    @server.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)
    def window_work_done_progress_cancel(ls: DrtritonLanguageServer, params: types.WorkDoneProgressCancelParams) -> None:
        job = ls.jobs.by_token(params.token)
        if job is not None:
            ls.jobs.cancel(job)

