"""Jobs on a remote host (`drtriton.remote`) through a real sshd: a generate job verifies there and its report names
the host; printDebugInformation says whether the remote answers; a remote that cannot be reached fails the job with
what to check, and the server keeps serving.

The remote workers run on this machine, through ssh (tests/ssh_server.py).
"""

from __future__ import annotations

import json
import platform

import pytest
from lsp_helpers import code_lenses, execute, open_file, push_settings, wait_for_job_end, wait_until, worker_processes

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


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
