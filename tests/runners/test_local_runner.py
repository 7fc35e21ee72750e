"""The local runner's worker protocol: one answer per request, progress on the side, failures named; a spare
worker started ahead is taken by the next job for its environment only, and never outlives its runner.

Each test starts real `drtriton worker` processes.
"""

from __future__ import annotations

import gc
import io
import os
import select
import signal
import subprocess
import sys
import threading
import time

import psutil
import pytest

from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners import protocol
from drtriton_lsp.runners.local import PRELOAD_ID, JobFailure, JobLimits, LocalRunner
from drtriton_lsp.source.extract import extract_task
from drtriton_lsp.task import Task


def test_capabilities_reports_devices_and_methods():
    answer = LocalRunner().call("capabilities", {})
    assert answer["protocol"] == protocol.PROTOCOL_VERSION
    assert {"capture", "verify", "benchmark", "capabilities"} <= set(answer["methods"])
    assert answer["versions"]["torch"] and answer["cuda_available"] in (True, False)


def test_an_unknown_method_is_an_internal_error_not_a_hang():
    with pytest.raises(DrtritonError, match="unknown method"):
        LocalRunner().call("no_such_method", {})


def test_cancelling_kills_the_worker_promptly():
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(JobFailure) as caught:
        LocalRunner().call("capabilities", {}, limits=JobLimits(timeout_s=60), cancel=cancel)
    assert caught.value.reason == "cancelled"


def test_messages_are_one_json_object_per_line():
    stream = io.StringIO()
    protocol.write_message(stream, protocol.request(1, "verify", {"a": "line\nbreak"}))
    protocol.write_message(stream, protocol.notification("progress", {"message": "x"}))
    stream.seek(0)
    assert protocol.read_message(stream)["params"] == {"a": "line\nbreak"}
    assert protocol.read_message(stream)["method"] == "progress"
    assert protocol.read_message(stream) is None


# A spare worker: started by `prepare`, taken by the next call with the same environment, never reused.

CPU_ENVIRONMENT = {"TRITON_INTERPRET": "1"}
# importing this task never returns, so a capture of it runs until it is stopped
HANGING_TASK = Task(name="hang", kind="module", source="import time\ntime.sleep(600)\n").to_json()


def wait_until_preloaded(worker: subprocess.Popen) -> None:
    """Block until the spare has answered its preload (the answer waits, unread, on its stdout)."""
    readable, _, _ = select.select([worker.stdout], [], [], 120)
    assert readable, "the spare did not finish its preload in 120 s"


@pytest.mark.slow
def test_a_call_takes_the_spare_prepared_for_its_environment_and_a_spare_serves_one_job(started_workers):
    runner = LocalRunner()
    runner.prepare(env=CPU_ENVIRONMENT)
    answer = runner.call("capabilities", {}, env=CPU_ENVIRONMENT)
    assert answer["versions"]["torch"] and "preload" in answer["methods"]
    (spare,) = started_workers  # the job ran in the spare: no other worker was started
    assert spare.returncode == 0  # it ended after its one job
    runner.call("capabilities", {}, env=CPU_ENVIRONMENT)
    assert len(started_workers) == 2  # no spare left: the next job gets a fresh worker


@pytest.mark.slow
def test_a_spare_prepared_for_a_capture_warms_up_torch_export_without_an_error(started_workers):
    runner = LocalRunner()
    runner.prepare(env=CPU_ENVIRONMENT, method="capture")
    (spare,) = started_workers
    answer = protocol.read_message(spare.stdout)  # the preload's answer, which a job's call would skip
    assert answer["id"] == PRELOAD_ID and answer["result"] == {"cuda_context": False}, answer
    runner.close()


SPAWNS_A_CHILD = """import subprocess
import sys

import torch
import torch.nn as nn

# a process the job leaves behind, as torch.compile's compile workers are
CHILD = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "drtriton-test-leftover-child"])


# drtriton: inputs = [torch.randn(4, 8)]
class Doubles(nn.Module):
    def forward(self, x):
        return x * 2 if CHILD.pid else x  # uses CHILD, so the task keeps the line that starts it
"""


@pytest.mark.slow
def test_a_worker_ends_the_processes_its_job_started_when_it_exits():
    task = extract_task(SPAWNS_A_CHILD, "Doubles", None)
    answer = LocalRunner().call("capture", {"task": task.to_json()}, env=CPU_ENVIRONMENT)
    assert answer["graph"]["nodes"]  # the capture ran, and returned once the worker had exited
    leftovers = [
        process for process in psutil.process_iter(["cmdline"])
        if "drtriton-test-leftover-child" in (process.info["cmdline"] or [])
    ]
    assert leftovers == []


@pytest.mark.slow
def test_spares_for_two_methods_in_one_environment_serve_two_calls_one_each(started_workers):
    runner = LocalRunner()
    runner.prepare(env=CPU_ENVIRONMENT, method="capture")
    runner.prepare(env=CPU_ENVIRONMENT)
    runner.prepare(env=CPU_ENVIRONMENT)  # kept: one spare per environment and method
    assert len(started_workers) == 2  # both started ahead, though they share an environment
    for _ in range(2):
        assert runner.call("capabilities", {}, env=CPU_ENVIRONMENT)["versions"]["torch"]
    assert len(started_workers) == 2 and [worker.returncode for worker in started_workers] == [0, 0]


@pytest.mark.slow
def test_a_spare_for_another_environment_is_killed_not_used(started_workers):
    runner = LocalRunner()
    runner.prepare(env={"DRTRITON_TEST_SPARE": "a"})
    answer = runner.call("capabilities", {}, env={"DRTRITON_TEST_SPARE": "b"})
    assert answer["versions"]["torch"]
    spare, fresh = started_workers
    assert fresh.returncode == 0 and spare.poll() is None  # kept for a call in its own environment, until closed
    runner.close()
    assert spare.returncode == -signal.SIGKILL


@pytest.mark.slow
def test_a_spare_killed_while_idle_is_replaced_by_a_fresh_worker_without_an_error(started_workers):
    runner = LocalRunner()
    runner.prepare()
    spare = started_workers[0]
    wait_until_preloaded(spare)
    os.killpg(spare.pid, signal.SIGKILL)
    spare.wait()
    assert runner.call("capabilities", {})["versions"]["torch"]
    assert len(started_workers) == 2


@pytest.mark.slow
def test_a_spare_killed_while_preloading_its_job_is_replaced_by_a_fresh_worker_without_an_error(started_workers):
    runner = LocalRunner()
    runner.prepare()
    spare = started_workers[0]
    # the job is handed over at once; the spare is still importing torch when it is killed
    threading.Timer(0.5, os.killpg, args=(spare.pid, signal.SIGKILL)).start()
    assert runner.call("capabilities", {})["versions"]["torch"]
    assert spare.returncode == -signal.SIGKILL and len(started_workers) == 2


@pytest.mark.slow
def test_the_timeout_counts_from_the_hand_over_not_from_the_spares_start(started_workers):
    timeout_s = 3.0
    runner = LocalRunner()
    prepared_at = time.monotonic()
    runner.prepare()
    wait_until_preloaded(started_workers[0])
    time.sleep(max(0.0, prepared_at + timeout_s + 1 - time.monotonic()))
    # the spare is older than the timeout; the job itself takes milliseconds
    assert runner.call("capabilities", {}, limits=JobLimits(timeout_s=timeout_s))["versions"]["torch"]

    runner.prepare()
    wait_until_preloaded(started_workers[1])
    handed_over = time.monotonic()
    with pytest.raises(JobFailure) as caught:
        runner.call("capture", {"task": HANGING_TASK}, limits=JobLimits(timeout_s=timeout_s))
    assert caught.value.reason == "timeout"
    assert timeout_s <= time.monotonic() - handed_over < timeout_s + 5
    assert len(started_workers) == 2


@pytest.mark.slow
def test_cancelling_a_job_running_in_a_spare_kills_it(started_workers):
    runner = LocalRunner()
    runner.prepare()
    spare = started_workers[0]
    wait_until_preloaded(spare)
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()
    with pytest.raises(JobFailure) as caught:
        runner.call("capture", {"task": HANGING_TASK}, limits=JobLimits(timeout_s=60), cancel=cancel)
    assert caught.value.reason == "cancelled"
    assert spare.returncode == -signal.SIGKILL and len(started_workers) == 1


@pytest.mark.slow
def test_closing_or_dropping_the_runner_leaves_no_worker_behind(started_workers):
    closed = LocalRunner()
    closed.prepare()
    dropped = LocalRunner()
    dropped.prepare(env=CPU_ENVIRONMENT)
    with LocalRunner() as left_by_its_block:
        left_by_its_block.prepare()
    closed.close()
    del dropped
    gc.collect()
    assert [worker.returncode for worker in started_workers] == [-signal.SIGKILL] * 3
    assert not [child for child in psutil.Process().children(recursive=True) if "drtriton_lsp.worker.main" in child.cmdline()]


@pytest.mark.slow
def test_closing_the_runner_stops_a_call_in_flight_in_another_thread(started_workers):
    runner = LocalRunner()
    failures: list[JobFailure] = []

    def call() -> None:
        with pytest.raises(JobFailure) as caught:
            runner.call("capture", {"task": HANGING_TASK}, limits=JobLimits(timeout_s=60))
        failures.append(caught.value)

    caller = threading.Thread(target=call)
    caller.start()
    deadline = time.monotonic() + 10
    while not started_workers and time.monotonic() < deadline:
        time.sleep(0.1)
    time.sleep(1)  # the job is handed over: the call reads the worker's output
    runner.close()  # as a language server does when its session ends
    caller.join(timeout=10)
    assert [(failure.reason, failure.detail) for failure in failures] == [("cancelled", "the runner was closed")]
    assert started_workers[0].returncode == -signal.SIGKILL


@pytest.mark.slow
def test_a_spare_is_killed_when_the_interpreter_exits():
    program = (
        "from drtriton_lsp.runners.local import LocalRunner\n"
        "runner = LocalRunner()\n"
        "runner.prepare(on_start=print)\n"
    )
    finished = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=60, check=True)
    spare_pid = int(finished.stdout)
    # killed and reaped before the interpreter ended, long before the spare would have finished importing torch
    assert not psutil.pid_exists(spare_pid)
