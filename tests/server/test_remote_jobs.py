"""Jobs on a remote host (`drtriton.remote`) through a real sshd: a generate job verifies there and its report names
the host; workers started ahead are ssh sessions that the next job takes; printDebugInformation says whether the
remote answers; a remote that cannot be reached, or a connection dropped mid-job, fails the job with what to check,
leaves nothing running there, and the server keeps serving.

The remote workers run on this machine, through ssh (tests/ssh_server.py).
"""

from __future__ import annotations

import json
import platform

import psutil
import pytest
from lsp_helpers import (
    announced_pids,
    code_lenses,
    execute,
    open_file,
    push_settings,
    wait_for_job_end,
    wait_until,
    worker_processes,
)

from tests.process_trees import alive_after
from tests.test_no_orphaned_workers import wait_for_file

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

# A target whose capture never ends: its example inputs create a marker file (the job is then under way), then wait.
HANGING_CAPTURE = """import pathlib
import time

import torch
import torch.nn as nn

MARKER = {marker!r}


class Doubled(nn.Module):
    def forward(self, x):
        return x * 2.0


def get_inputs():
    pathlib.Path(MARKER).touch()
    time.sleep(600)
    return [torch.randn(8)]


def get_init_inputs():
    return []
"""


async def test_a_generate_job_runs_on_the_remote_host_and_its_report_names_the_host(remote_ssh, client, example_file):
    if client.editor == "neovim":
        pytest.skip("where jobs run does not depend on the editor: the VS Code profile covers it")
    push_settings(client, remote=remote_ssh.address, remotePython=remote_ssh.remote_python)
    uri = open_file(client, example_file())
    target = {"uri": uri, "target": "ScaledActivation"}

    information = json.loads(await execute(client, "drtriton.printDebugInformation"))
    assert information["remote"] == {
        "address": remote_ssh.address, "python": remote_ssh.remote_python, "answers": True, "host_name": platform.node()
    }  # fmt: skip
    assert information["devices"]["host"] == platform.node()

    started = await execute(client, "drtriton.generate", target)
    end = await wait_for_job_end(client, started["token"])
    assert end.message == "ScaledActivation: verified · no speed measured: no GPU"
    assert worker_processes(client) == []  # no worker ran beside the server: they ran through ssh
    report = await execute(client, "drtriton.showReport", target)
    device = f"cpu-interpreter ({information['devices']['cpu_name']} on {platform.node()})"
    assert f"| device | {device} |" in report["markdown"]


async def test_a_remote_that_cannot_be_reached_fails_the_job_saying_what_to_check(remote_ssh, client, example_file):
    unreachable = f"{remote_ssh.address}:1"
    push_settings(client, remote=unreachable)
    uri = open_file(client, example_file())
    started = await execute(client, "drtriton.generate", {"uri": uri, "target": "ScaledActivation"})
    end = await wait_for_job_end(client, started["token"])
    assert end.message.startswith(f"the capture worker failed: the ssh connection to {unreachable} failed or ended")
    assert f"drtriton: ScaledActivation: {end.message}" in [message.message for message in client.messages]
    what_to_check = "check that `ssh -p 1 drtriton-test-gpu true` works from this machine without a prompt"
    await wait_until(
        lambda: any(what_to_check in message.message for message in client.log_messages), 5, "what to check, in the log"
    )

    information = json.loads(await execute(client, "drtriton.printDebugInformation"))
    assert information["remote"]["answers"] is False
    assert information["devices"]["error"].startswith(
        "the capabilities worker failed: connection_lost: the ssh connection"
    )
    assert information["devices"]["what_to_check"].startswith(what_to_check)
    assert await code_lenses(client, uri)  # the server still serves


async def test_workers_started_ahead_are_ssh_sessions_on_the_remote_that_the_next_job_takes(
    remote_ssh, client, example_file
):
    if client.editor == "neovim":
        pytest.skip("where workers start does not depend on the editor: the VS Code profile covers it")
    push_settings(client, remote=remote_ssh.address, remotePython=remote_ssh.remote_python, warmWorker=True)
    uri = open_file(client, example_file())
    await code_lenses(client, uri)
    ahead = await wait_until(lambda: announced_pids(client)[1:] and announced_pids(client), 30, "workers started ahead")
    assert len(ahead) == 2 and all("ssh" in psutil.Process(pid).name() for pid in ahead)
    await wait_until(lambda: len(remote_ssh.worker_hosts()) == 2, 30, "two worker hosts on the remote")

    started = await execute(client, "drtriton.generate", {"uri": uri, "target": "ScaledActivation"})
    end = await wait_for_job_end(client, started["token"])
    assert end.message == "ScaledActivation: verified · no speed measured: no GPU"
    # the job's capture and verification ran in those sessions, which ended with their steps; two more were started
    assert not any(psutil.pid_exists(pid) for pid in ahead)
    assert len(announced_pids(client)[2:]) == 2 and worker_processes(client) == []


async def test_a_connection_dropped_mid_job_fails_it_saying_what_to_check_and_the_server_keeps_serving(
    remote_ssh, client, tmp_path, kill_at_end
):
    if client.editor == "neovim":
        pytest.skip("what a lost connection does to a job does not depend on the editor: the VS Code profile covers it")
    marker = tmp_path / "capturing"
    path = tmp_path / "hanging.py"
    path.write_text(HANGING_CAPTURE.format(marker=str(marker)))
    push_settings(client, remote=remote_ssh.address, remotePython=remote_ssh.remote_python)
    uri = open_file(client, path)
    started = await execute(client, "drtriton.generate", {"uri": uri, "target": "Doubled"})
    wait_for_file(marker, 120)  # the capture runs on the remote, in get_inputs
    remote = remote_ssh.session_processes()
    kill_at_end.update(remote)
    for host in remote_ssh.worker_hosts():  # the capture's, and the verification's started meanwhile
        host.parent().kill()  # the session's sshd process: the connection ends as if the network had dropped

    end = await wait_for_job_end(client, started["token"], timeout_s=30)
    assert end.message.startswith(f"the capture worker failed: the ssh connection to {remote_ssh.address} failed")
    assert f"drtriton: Doubled: {end.message}" in [message.message for message in client.messages]
    what_to_check = "check that `ssh drtriton-test-gpu true` works"
    await wait_until(
        lambda: any(what_to_check in message.message for message in client.log_messages), 5, "what to check, in the log"
    )
    assert alive_after(remote, 5) == []  # the host, the worker and its group guard ended with the connection
    assert await code_lenses(client, uri)  # the server still serves
