"""The workers started ahead (setting drtriton.warmWorker): two are started when a target's lens is shown (for
the capture and the verification), the next job takes them, two more are started after the job, and turning the
setting off stops them.

Which worker a job's first step runs in is tested on the runner (tests/engine/test_warm_workers.py); here, the
server's side: when workers start and stop, as the editor's log and the process table show them.
"""

from __future__ import annotations

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

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

def live_worker_pids(client) -> list[int]:
    live = []
    for process in worker_processes(client):
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                live.append(process.pid)
        except psutil.NoSuchProcess:
            continue
    return sorted(live)


async def test_a_shown_target_gets_two_workers_ahead_which_the_next_job_takes(client, example_file):
    push_settings(client, warmWorker=True)
    uri = open_file(client, example_file())
    await code_lenses(client, uri)
    ahead = await wait_until(lambda: announced_pids(client)[1:] and announced_pids(client), 30, "workers started ahead")
    assert len(ahead) == 2 and live_worker_pids(client) == sorted(ahead)
    await code_lenses(client, uri)  # asked again (editors do on every change): the live workers are kept
    assert announced_pids(client) == ahead

    started = await execute(client, "drtriton.generate", {"uri": uri, "target": "ScaledActivation"})
    end = await wait_for_job_end(client, started["token"])
    assert end.message.startswith("ScaledActivation: verified")
    # the job's capture and verification ran in them, and they ended with their steps; the next two were
    # started before the job's end reached the editor
    assert not any(psutil.pid_exists(pid) for pid in ahead)
    after_the_job = announced_pids(client)[2:]
    assert len(after_the_job) == 2 and live_worker_pids(client) == sorted(after_the_job)


async def test_turning_the_setting_off_stops_the_workers_ahead_and_starts_no_others(client, example_file):
    push_settings(client, warmWorker=True)
    uri = open_file(client, example_file())
    await code_lenses(client, uri)
    ahead = await wait_until(lambda: announced_pids(client)[1:] and announced_pids(client), 30, "workers started ahead")

    push_settings(client, warmWorker=False)
    await wait_until(lambda: not any(psutil.pid_exists(pid) for pid in ahead), 10, "the workers ahead to stop")
    await code_lenses(client, uri)
    started = await execute(client, "drtriton.generate", {"uri": uri, "target": "ScaledActivation"})
    await wait_for_job_end(client, started["token"])
    assert announced_pids(client) == ahead and live_worker_pids(client) == []
