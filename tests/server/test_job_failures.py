"""Jobs that do not end well: cancelled, a crashing worker, no GPU, unsupported ops, an edit made while the job ran.

Each must end with a clear message, and the server must keep serving.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_helpers import (
    change_file,
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

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

SEGFAULTS_ON_CONSTRUCTION = """import ctypes

import torch
import torch.nn as nn


# drtriton: inputs = [torch.randn(4, 8)]
class Crashes(nn.Module):
    def __init__(self):
        super().__init__()
        ctypes.string_at(0)

    def forward(self, x):
        return torch.relu(x) * 2.0
"""


ONLY_UNSUPPORTED_OPS = """import torch
import torch.nn as nn


# drtriton: inputs = [torch.randn(4, 16)]
class SortedRows(nn.Module):
    def forward(self, x):
        return torch.sort(x, dim=-1).values
"""


async def test_cancel_stops_the_job_and_its_worker(client, example_file):
    uri = open_file(client, example_file())
    started = await execute(client, "drtriton.generate", {"uri": uri, "target": "ScaledActivation"})
    await wait_until(lambda: worker_processes(client), 60, "a worker process")

    if client.editor == "visual-studio-code":  # VS Code cancels through the progress notification's button
        client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=started["token"]))
    else:
        assert await execute(client, "drtriton.cancel", started["jobId"]) == {"cancelled": True, "jobId": started["jobId"]}

    end = await wait_for_job_end(client, started["token"], timeout_s=30)
    assert end.message == "cancelled; the worker was stopped"
    assert worker_processes(client) == []
    assert [lens.command.title for lens in await code_lenses(client, uri)] == ["Generate Triton kernel"]


async def test_worker_crash_is_a_clear_message_and_the_server_keeps_serving(client, tmp_path):
    path = tmp_path / "crashes.py"
    path.write_text(SEGFAULTS_ON_CONSTRUCTION)
    uri = open_file(client, path)
    started = await execute(client, "drtriton.generate", {"uri": uri, "target": "Crashes"})

    end = await wait_for_job_end(client, started["token"], timeout_s=60)
    assert end.message.startswith("the capture worker failed: ") and "SIGSEGV" in end.message
    errors = [m.message for m in client.messages if m.type == types.MessageType.Error]
    assert errors == [f"drtriton: Crashes: {end.message}"]
    (lens,) = await code_lenses(client, uri)
    assert lens.command.title == f"failed: {end.message}"
    assert worker_processes(client) == []


async def test_apply_refuses_after_an_edit_made_during_the_job_and_offers_to_rerun(client, example_file):
    path = example_file()
    uri = open_file(client, path)
    target = {"uri": uri, "target": "ScaledActivation"}
    started = await execute(client, "drtriton.generate", target)
    change_file(client, uri, 2, path.read_text() + "\n# a note typed while the job ran\n")

    end = await wait_for_job_end(client, started["token"])
    assert end.message.startswith("ScaledActivation: verified")
    client.message_request_choice = "Re-run generate"
    answer = await execute(client, "drtriton.apply", target)

    assert answer["applied"] is False
    assert "the file changed since the job read it (version 1, now 2)" in answer["message"]
    assert client.applied_edits == []
    (offer,) = await wait_until(lambda: client.message_requests, 5, "the offer to re-run")
    assert offer.type == types.MessageType.Warning and offer.message == f"drtriton: {answer['message']}"
    assert [action.title for action in offer.actions] == ["Re-run generate"]

    token = await wait_until(lambda: [t for t in client.progress_reports if t != started["token"]], 10, "the re-run")
    assert (await wait_for_job_end(client, token[0])).message.startswith("ScaledActivation: verified")
    assert await execute(client, "drtriton.apply", target) == {"applied": True}
    version, _ = document_edits(client, client.applied_edits[0].edit, uri)
    assert version in (2, None)


UNTRACEABLE_BRANCH = """import torch
import torch.nn as nn


# drtriton: inputs = [torch.randn(8, 16)]
class Gate(nn.Module):
    def forward(self, x):
        y = torch.relu(x)
        if y.sum() > 0:
            return y * 2.0
        return y
"""


async def test_a_failure_is_a_warning_on_the_line_it_names_and_follows_the_target(client, tmp_path):
    path = tmp_path / "gate.py"
    path.write_text(UNTRACEABLE_BRANCH)
    uri = open_file(client, path)
    started = await execute(client, "drtriton.generate", {"uri": uri, "target": "Gate"})
    end = await wait_for_job_end(client, started["token"], timeout_s=120)
    assert "control flow" in end.message

    def failure() -> types.Diagnostic | None:
        found = [d for d in client.diagnostics.get(uri, []) if d.message.startswith("Gate: failed")]
        return found[0] if found else None

    diagnostic = await wait_until(failure, 10, "the failure's diagnostic")
    assert diagnostic.severity == types.DiagnosticSeverity.Warning
    branch = UNTRACEABLE_BRANCH.splitlines().index("        if y.sum() > 0:")
    assert (diagnostic.range.start.line, diagnostic.range.start.character) == (branch, 8)
    assert "torch.where" in diagnostic.message  # what to do, not only what happened
    # two lines added above the target: the diagnostic moves with the branch it names
    change_file(client, uri, 2, "# a comment\n# another\n" + UNTRACEABLE_BRANCH)
    await wait_until(lambda: failure() and failure().range.start.line == branch + 2, 10, "the moved diagnostic")


@pytest.mark.skipif(Path("/dev/nvidiactl").exists(), reason="needs a machine without an NVIDIA GPU")
async def test_device_cuda_without_a_gpu_fails_the_job_clearly(client, example_file):
    push_settings(client, device="cuda")
    uri = open_file(client, example_file())
    started = await execute(client, "drtriton.generate", {"uri": uri, "target": "ScaledActivation"})

    end = await wait_for_job_end(client, started["token"], timeout_s=60)
    assert end.message == "the drtriton.device setting is cuda, but the worker sees no CUDA GPU"
    errors = [m.message for m in client.messages if m.type == types.MessageType.Error]
    assert errors == [f"drtriton: ScaledActivation: {end.message}"]
    hint = [m.message for m in client.log_messages if m.type == types.MessageType.Error]
    assert hint == [
        f"drtriton: ScaledActivation: {end.message}\n"
        "set drtriton.device to cpu for verification under the Triton interpreter, or use a machine with a GPU"
    ]
    (lens,) = await code_lenses(client, uri)
    assert lens.command.title == f"failed: {end.message}"


async def test_target_of_unsupported_ops_gets_a_report_saying_nothing_was_generated(client, tmp_path):
    path = tmp_path / "sorted_rows.py"
    path.write_text(ONLY_UNSUPPORTED_OPS)
    uri = open_file(client, path)
    started = await execute(client, "drtriton.generate", {"uri": uri, "target": "SortedRows"})

    end = await wait_for_job_end(client, started["token"], timeout_s=120)
    # The middle says why, in the compiler's words (they change as it learns ops).
    assert end.message.startswith("SortedRows: no_candidate · ") and end.message.endswith("every op stays in PyTorch")
    titles = [lens.command.title for lens in await code_lenses(client, uri)]
    assert titles == [end.message.removeprefix("SortedRows: ")]  # no Apply
    report = await execute(client, "drtriton.showReport", {"uri": uri, "target": "SortedRows"})
    assert "aten.sort" in report["markdown"]
