"""The worker started ahead (setting drtriton.warmWorker): one is started when a target's lens is shown, the
next job takes it, another is started after the job, and turning the setting off stops it.

Which worker a job's first step runs in is tested on the runner (tests/engine/test_warm_workers.py); here, the
server's side: when workers start and stop, as the editor's log and the process table show them.
"""

from __future__ import annotations

import psutil
import pytest
from lsp_helpers import code_lenses, execute, open_file, push_settings, wait_for_job_end, wait_until, worker_processes

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

ANNOUNCEMENT = ("drtriton: worker ", " started ahead for the next job")


def announced_pids(client) -> list[int]:
    """The pids of the workers the server said it started ahead, in order (from window/logMessage)."""
    prefix, suffix = ANNOUNCEMENT
    return [
        int(message.message[len(prefix) : -len(suffix)])
        for message in client.log_messages
        if message.message.startswith(prefix) and message.message.endswith(suffix)
    ]


def live_worker_pids(client) -> list[int]:
    return sorted(process.pid for process in worker_processes(client) if process.status() != psutil.STATUS_ZOMBIE)


async def test_a_shown_target_gets_one_worker_ahead_which_the_next_job_takes(client, example_file):
    push_settings(client, warmWorker=True)
    uri = open_file(client, example_file())
    await code_lenses(client, uri)
    (ahead,) = await wait_until(lambda: announced_pids(client), 30, "a worker started ahead")
    assert live_worker_pids(client) == [ahead]
    await code_lenses(client, uri)  # asked again (editors do on every change): the live worker is kept
    assert announced_pids(client) == [ahead]

    started = await execute(client, "drtriton.generate", {"uri": uri, "target": "ScaledActivation"})
    end = await wait_for_job_end(client, started["token"])
    assert end.message.startswith("ScaledActivation: verified")
    # the job's capture ran in it and it ended with its job; the next one was started before the job's end
    assert not psutil.pid_exists(ahead)
    first, after_the_job = announced_pids(client)
    assert first == ahead and live_worker_pids(client) == [after_the_job]


async def test_turning_the_setting_off_stops_the_worker_ahead_and_starts_no_other(client, example_file):
    push_settings(client, warmWorker=True)
    uri = open_file(client, example_file())
    await code_lenses(client, uri)
    (ahead,) = await wait_until(lambda: announced_pids(client), 30, "a worker started ahead")

    push_settings(client, warmWorker=False)
    await wait_until(lambda: not psutil.pid_exists(ahead), 10, "the worker ahead to stop")
    await code_lenses(client, uri)
    started = await execute(client, "drtriton.generate", {"uri": uri, "target": "ScaledActivation"})
    await wait_for_job_end(client, started["token"])
    assert announced_pids(client) == [ahead] and live_worker_pids(client) == []
