"""`textDocument/codeLens`: one line above each target: its result, a running job, its applied kernel (with
Re-verify, Benchmark and Remove kernel), or "Generate Triton kernel".

VS Code draws lenses above the line; Neovim shows them as virtual text after `vim.lsp.codelens.refresh()`.
Answered at once from the newest analysis; when it was carried over to newer text, a refresh follows the next one.
"""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from drtriton_lsp.engine.report import summary
from drtriton_lsp.server.language_server import DrtritonLanguageServer, client_range, target_arguments
from drtriton_lsp.server.remove_kernel import REMOVE_KERNEL
from drtriton_lsp.server.results import TargetResult
from drtriton_lsp.server.verify_and_benchmark import BENCHMARK, VERIFY


RUNNING_WORDS = {"generate": "generating a kernel", "verify": "verifying", "benchmark": "benchmarking"}


def lens_title(result: TargetResult) -> str:
    """E.g. "verified · 2.41x vs eager · 1.38x vs torch.compile · NVIDIA H200" or "failed: <reason>"."""
    if result.report is None:
        return f"failed: {result.error}"
    return summary(result.report)


def register(server: DrtritonLanguageServer) -> None:
    @server.feature(types.TEXT_DOCUMENT_CODE_LENS, types.CodeLensOptions(resolve_provider=False))
    async def text_document_code_lens(
        ls: DrtritonLanguageServer, params: types.CodeLensParams
    ) -> list[types.CodeLens] | None:
        uri = params.text_document.uri
        found = await ls.result_view_snapshot(uri)
        if found is None:
            return None
        document, analysis = found
        lines = document.lines
        lenses = []
        for analyzed in analysis.targets:
            name = analyzed.target.name
            where = client_range(document, lines, analyzed.target.name_span)
            arguments: list[Any] = target_arguments(uri, name)
            running = ls.jobs.running_for(uri, name)
            result = ls.results.current(analysis, name)
            if running is not None:  # the job's lens alone: an earlier result would read as the new one
                title = f"drtriton: {RUNNING_WORDS.get(running.kind, running.kind)}… (click to cancel)"
                lenses.append(_lens(where, title, "drtriton.cancel", [running.id]))
            elif analyzed.applied is not None:  # written into the file: shown as applied, with its own actions
                if result is None:
                    lenses.append(_lens(where, f"drtriton: kernel {analyzed.applied.summary()}", VERIFY, arguments))
                    lenses.append(_lens(where, "Re-verify", VERIFY, arguments))
                else:  # re-verified in this session: still said to be applied
                    title = f"drtriton: kernel {analyzed.applied.applied_on} · {lens_title(result)}"
                    lenses.append(_lens(where, title, "drtriton.showReport", arguments))
                    lenses.append(_lens(where, "Re-verify", VERIFY, arguments))
                    if not result.refusal_to("benchmark") and ls.settings.device != "cpu":
                        lenses.append(_lens(where, "Benchmark", BENCHMARK, arguments))
                lenses.append(_lens(where, "Remove kernel", REMOVE_KERNEL, arguments))
            elif result is None:
                lenses.append(_lens(where, "Generate Triton kernel", "drtriton.generate", arguments))
            else:
                lenses.append(_lens(where, lens_title(result), "drtriton.showReport", arguments))
                if result.applicable:
                    lenses.append(_lens(where, "Apply verified kernel", "drtriton.apply", arguments))
        if analysis.targets and analysis.path is not None:
            ls.jobs.warm_workers_for(analysis.path)  # a target is on screen: its job may come next
        return lenses


def _lens(where: types.Range, title: str, command: str, arguments: list[Any]) -> types.CodeLens:
    return types.CodeLens(range=where, command=types.Command(title=title, command=command, arguments=arguments))
