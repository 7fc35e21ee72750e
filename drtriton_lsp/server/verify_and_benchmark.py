"""`workspace/executeCommand` drtriton.verify and drtriton.benchmark: the stored kernel, checked or timed again.

Each starts a job on the target's stored result (no new kernel is generated) and answers at once; editors show
it like a generate job, and its updated verdict or timing replaces the result in the lens, hover and report.
"""

from __future__ import annotations

import asyncio
from typing import Any

from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.server.generate import open_target
from drtriton_lsp.server.jobs import JobInput
from drtriton_lsp.server.language_server import DrtritonLanguageServer, target_from_arguments
from drtriton_lsp.server.results import TargetResult

VERIFY = "drtriton.verify"
BENCHMARK = "drtriton.benchmark"
BENCHMARK_NEEDS_A_GPU = "benchmarking needs a GPU, and the drtriton.device setting is cpu (set it to auto or cuda)"


async def request_on_stored_kernel(ls: DrtritonLanguageServer, uri: str, target_name: str, kind: str) -> dict[str, Any]:
    """Start a verify or benchmark job on the target's stored kernel, or say plainly why not."""
    return await ls.jobs.request(uri, target_name, kind, await _refusal(ls, uri, target_name, kind))


async def _refusal(ls: DrtritonLanguageServer, uri: str, target_name: str, kind: str) -> str | JobInput:
    """Why the job cannot start (a message), or the snapshot it works on: the stored result's text and outcome."""
    found = await open_target(ls, uri, target_name)
    if isinstance(found, str):
        return found
    document, analysis = found
    result = ls.results.current(analysis, target_name)
    analyzed = analysis.target_named(target_name)
    if result is None and analyzed.applied is not None:  # the kernel written into the file, as it stands there
        from drtriton_lsp.engine.pipeline import applied_outcome

        try:
            # libcst edits a copy of the file: off the event loop, which keeps answering the editor
            outcome = await asyncio.to_thread(applied_outcome, document.source, analysis.path, target_name)
        except DrtritonError as problem:
            return f"{target_name}: {problem.message}. {problem.hint}"
        result = TargetResult(
            analysis.uri, target_name, analyzed.text_hash, document.source, document.version, outcome
        )
    if result is None:
        outdated = ls.results.outdated_by(analysis, target_name)
        if outdated == "applied":
            return f"{target_name}: its kernel was applied, which changed the target; run Generate again to {kind} it"
        if outdated == "edited":
            return f"{target_name}: the target changed since the kernel was generated; run Generate again"
        return f"{target_name} has no kernel to {kind} yet; run Generate first"
    refusal = result.refusal_to(kind)
    if refusal:
        return f"{target_name}: {refusal}"
    if kind == "benchmark" and ls.settings.device == "cpu":
        return f"{target_name}: {BENCHMARK_NEEDS_A_GPU}"
    return JobInput(
        text=result.source_text,
        version=result.source_version,
        path=analysis.path,
        text_hash=result.text_hash,
        settings=ls.settings,
        outcome=result.outcome,
    )


def register(server: DrtritonLanguageServer) -> None:
    @server.command(VERIFY)
    async def verify(ls: DrtritonLanguageServer, *arguments: Any) -> dict[str, Any]:
        target = target_from_arguments(arguments)
        if target is None:
            return {"status": "refused", "message": f"{VERIFY} takes one argument: {{uri, target}}"}
        return await request_on_stored_kernel(ls, *target, "verify")

    @server.command(BENCHMARK)
    async def benchmark(ls: DrtritonLanguageServer, *arguments: Any) -> dict[str, Any]:
        target = target_from_arguments(arguments)
        if target is None:
            return {"status": "refused", "message": f"{BENCHMARK} takes one argument: {{uri, target}}"}
        return await request_on_stored_kernel(ls, *target, "benchmark")
