"""drtriton.verify and drtriton.benchmark: jobs on the stored kernel that update its lens, diagnostic and report;
refused plainly without a kernel, after an edit, after Apply, and (benchmark) without a GPU; cancellable."""

from __future__ import annotations

import re

import pytest
from lsp_helpers import (
    applied_text,
    change_file,
    code_actions,
    code_lenses,
    document_edits,
    execute,
    open_file,
    push_settings,
    wait_for_job_end,
    wait_until,
    worker_processes,
)
from lsprotocol import types

from drtriton_lsp.server.verify_and_benchmark import BENCHMARK_NEEDS_A_GPU

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

TARGET = "ScaledActivation"
FORWARD_LINE = 20  # inside ScaledActivation.forward


def warnings(client) -> list[str]:
    return [m.message for m in client.messages if m.type == types.MessageType.Warning]


async def action_titles(client, uri: str) -> list[str]:
    return [action.title for action in await code_actions(client, uri, FORWARD_LINE)]


async def generated(client, uri: str) -> types.WorkDoneProgressEnd:
    started = await execute(client, "drtriton.generate", {"uri": uri, "target": TARGET})
    end = await wait_for_job_end(client, started["token"])
    assert end.message == f"{TARGET}: verified · no speed measured: no GPU"
    return end


async def test_verify_and_benchmark_work_on_the_stored_kernel_and_refuse_without_a_current_one(client, example_file):
    path = example_file()
    uri = open_file(client, path)
    target = {"uri": uri, "target": TARGET}

    for command, kind in (("drtriton.verify", "verify"), ("drtriton.benchmark", "benchmark")):
        answer = await execute(client, command, target)
        assert answer == {"status": "refused", "message": f"{TARGET} has no kernel to {kind} yet; run Generate first"}
    assert warnings(client)[-2:] == [
        f"drtriton: {TARGET} has no kernel to verify yet; run Generate first",
        f"drtriton: {TARGET} has no kernel to benchmark yet; run Generate first",
    ]
    assert await action_titles(client, uri) == [f"drtriton: Generate Triton kernel for {TARGET}"]

    await generated(client, uri)
    # with drtriton.device = cpu, Benchmark is greyed out with its reason where the editor can show that (VS Code),
    # and left out where it cannot (Neovim 0.11): never offered to be refused
    benchmark = [f"drtriton: Benchmark kernel for {TARGET}"] if client.editor == "visual-studio-code" else []
    assert await action_titles(client, uri) == [
        f"drtriton: Generate Triton kernel for {TARGET}",
        f"drtriton: Verify kernel for {TARGET}",
        *benchmark,
        f"drtriton: Apply verified kernel to {TARGET}",
        f"drtriton: Show report for {TARGET}",
    ]
    disabled = {action.title: action.disabled for action in await code_actions(client, uri, FORWARD_LINE)}
    if benchmark:
        assert disabled[benchmark[0]].reason == BENCHMARK_NEEDS_A_GPU
    assert not any(reason for title, reason in disabled.items() if title not in benchmark)

    push_settings(client, trials=3)  # more evidence than the generate job's 2 trials
    started = await execute(client, "drtriton.verify", target)
    assert started["status"] == "started"
    end = await wait_for_job_end(client, started["token"])
    progress = client.progress_reports[started["token"]]
    assert progress[0].title == f"drtriton: {TARGET}" and progress[0].message == "verifying the stored kernel again"
    steps = [report.message for report in progress if isinstance(report, types.WorkDoneProgressReport)]
    assert "verifying the same kernel again on cpu-interpreter, with new inputs" in steps
    assert "trial 3/3" in " ".join(steps) and not any("capturing" in step for step in steps)  # not regenerated
    # 3 trials plus the verifier's other checks (strided, autograd, odd sizes, keyword call), all passed; the
    # generate job's were from other seeds
    assert re.fullmatch(rf"{TARGET}: re-verified \((\d+)/\1 trials, new inputs\) · no speed measured: no GPU", end.message)

    summary = end.message.removeprefix(f"{TARGET}: ")
    await wait_until(
        lambda: any(d.message == end.message for d in client.diagnostics.get(uri, [])), 10, "the updated diagnostic"
    )
    assert [lens.command.title for lens in await code_lenses(client, uri)] == [summary, "Apply verified kernel"]
    report = await execute(client, "drtriton.showReport", target)
    assert re.search(r"\| re-verified \| with new inputs \(seed base 10000\); before: verified, (\d+)/\1 trials, seed base 0,",
                     report["markdown"])
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(12, 8))
    )
    assert "| re-verified |" in hover.contents.value

    answer = await execute(client, "drtriton.benchmark", target)
    assert answer == {"status": "refused", "message": f"{TARGET}: {BENCHMARK_NEEDS_A_GPU}"}  # no job that fails
    assert warnings(client)[-1] == f"drtriton: {TARGET}: {BENCHMARK_NEEDS_A_GPU}"
    assert [lens.command.title for lens in await code_lenses(client, uri)] == [summary, "Apply verified kernel"]

    change_file(client, uri, 2, path.read_text().replace("/ 1.5", "/ 2.5"))
    for command in ("drtriton.verify", "drtriton.benchmark"):
        answer = await execute(client, command, target)
        assert answer["message"] == f"{TARGET}: the target changed since the kernel was generated; run Generate again"
    assert await action_titles(client, uri) == [f"drtriton: Generate Triton kernel for {TARGET}"]


async def test_a_running_verify_job_is_cancelled_and_an_applied_kernel_is_not_applied_twice(client, example_file):
    path = example_file()
    uri = open_file(client, path)
    target = {"uri": uri, "target": TARGET}
    await generated(client, uri)

    started = await execute(client, "drtriton.verify", target)
    again = await execute(client, "drtriton.generate", target)  # one job per target, whatever its kind
    assert again["status"] == "already running" and again["jobId"] == started["jobId"]
    assert await action_titles(client, uri) == [
        f"drtriton: Cancel job {started['jobId']} on {TARGET}",
        f"drtriton: Apply verified kernel to {TARGET}",
        f"drtriton: Show report for {TARGET}",
    ]
    # while it runs, the lens shows the job alone: the stored verdict would read as the new one's
    running = [lens.command.title for lens in await code_lenses(client, uri)]
    assert running == ["drtriton: verifying… (click to cancel)"]
    await wait_until(lambda: worker_processes(client), 60, "a worker process")
    if client.editor == "visual-studio-code":  # VS Code cancels through the progress notification's button
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=started["token"]))
    else:
        assert await execute(client, "drtriton.cancel", started["jobId"]) == {"cancelled": True, "jobId": started["jobId"]}
    end = await wait_for_job_end(client, started["token"], timeout_s=30)
    assert end.message == "cancelled; the worker was stopped"
    assert worker_processes(client) == []
    titles = [lens.command.title for lens in await code_lenses(client, uri)]
    assert titles == ["verified · no speed measured: no GPU", "Apply verified kernel"]  # the stored result stays

    assert await execute(client, "drtriton.apply", target) == {"applied": True}
    _, edits = document_edits(client, client.applied_edits[0].edit, uri)
    written = applied_text(path.read_text(), edits)
    change_file(client, uri, 2, written)  # the editor applies the edit and reports the change
    assert await execute(client, "drtriton.apply", target) == {
        "applied": False,
        "message": f"{TARGET}: its kernel is already applied; nothing was changed",
    }
    assert len(client.applied_edits) == 1
    # Verify now checks the applied kernel as it stands in the file (test_applied_kernels.py has the rest)
    answer = await execute(client, "drtriton.verify", target)
    assert answer["status"] == "started"
    assert (await wait_for_job_end(client, answer["token"])).message.startswith(f"{TARGET}: re-verified")
    forward_line = written.splitlines().index("    def forward(self, x: torch.Tensor) -> torch.Tensor:") + 1
    assert [action.title for action in await code_actions(client, uri, forward_line)] == [
        f"drtriton: Re-verify the applied kernel of {TARGET}",
        f"drtriton: Remove kernel from {TARGET}",
        f"drtriton: Show report for {TARGET}",
    ]
