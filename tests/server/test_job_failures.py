"""Jobs that do not end well: cancelled, a crashing worker, and an edit made while the job ran."""

from __future__ import annotations

import psutil
import pytest
from lsp_helpers import change_file, code_lenses, execute, open_file, wait_for_job_end, wait_until
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


def worker_processes(client) -> list[psutil.Process]:
    server = psutil.Process(client._server.pid)
    return [p for p in server.children(recursive=True) if "drtriton_lsp.runners.worker" in " ".join(p.cmdline())]


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


async def test_apply_refuses_after_an_edit_made_during_the_job(client, example_file):
    path = example_file()
    uri = open_file(client, path)
    target = {"uri": uri, "target": "ScaledActivation"}
    started = await execute(client, "drtriton.generate", target)
    change_file(client, uri, 2, path.read_text() + "\n# a note typed while the job ran\n")

    end = await wait_for_job_end(client, started["token"])
    assert end.message.startswith("ScaledActivation: verified")
    answer = await execute(client, "drtriton.apply", target)

    assert answer["applied"] is False
    assert "the file changed since the job read it (version 1, now 2)" in answer["message"]
    assert client.applied_edits == []
    warnings = [m.message for m in client.messages if m.type == types.MessageType.Warning]
    assert warnings == [f"drtriton: {answer['message']}"]
