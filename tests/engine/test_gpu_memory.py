"""Room on a shared GPU: jobs that hold a task's tensors there are admitted while their bytes fit, in the order they
asked, a job too large to share the GPU runs alone, and a cancel ends the wait; the session reserves for exactly the
jobs that hold tensors on the GPU (bench --jobs ran eight large convolutions out of memory before this)."""

from __future__ import annotations

import threading
import time

import pytest

from drtriton_lsp.compiler.graph import GraphInput, OpGraph, OpNode, TensorSpec
from drtriton_lsp.engine.gpu_memory import GPU_RUNTIME_BYTES, GPU_TENSOR_COPIES, USABLE_SHARE, GpuMemory, task_gpu_bytes
from drtriton_lsp.engine.session import WorkerSession
from drtriton_lsp.runners.runner import JobFailure, JobLimits

GiB = 1024**3


def start_holding(memory: GpuMemory, size: int, log: list[str], name: str, release: threading.Event,
                  cancel: threading.Event | None = None) -> threading.Thread:
    """A thread that holds `size` bytes until `release` is set, logging when it got in (or was turned away)."""

    def hold() -> None:
        with memory.hold(size, cancel) as admitted:
            log.append(name if admitted else f"{name} cancelled")
            if admitted:
                release.wait(10)

    thread = threading.Thread(target=hold, daemon=True)
    thread.start()
    return thread


def wait_for(condition, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


def test_jobs_share_the_gpu_while_their_bytes_fit_and_are_admitted_in_the_order_they_asked():
    memory = GpuMemory(int(100 * GiB / USABLE_SHARE))
    assert memory.capacity == pytest.approx(100 * GiB, rel=1e-9)
    log: list[str] = []
    first, second, third = threading.Event(), threading.Event(), threading.Event()
    start_holding(memory, 60 * GiB, log, "first", first)
    wait_for(lambda: log == ["first"])
    start_holding(memory, 50 * GiB, log, "large", second)  # does not fit beside the first: waits
    wait_for(lambda: len(memory._waiting) == 1)
    start_holding(memory, 10 * GiB, log, "small", third)  # would fit, but the large job asked first
    wait_for(lambda: len(memory._waiting) == 2)
    time.sleep(0.3)
    assert log == ["first"] and memory.reserved == 60 * GiB
    first.set()
    wait_for(lambda: log == ["first", "large", "small"])
    assert memory.reserved == 60 * GiB and memory.holders == 2
    second.set(), third.set()
    wait_for(lambda: memory.holders == 0)
    assert memory.reserved == 0


def test_a_job_larger_than_the_gpu_runs_alone_and_a_cancel_ends_a_wait():
    memory = GpuMemory(10 * GiB)
    log: list[str] = []
    release, cancel = threading.Event(), threading.Event()
    start_holding(memory, 50 * GiB, log, "huge", release)
    wait_for(lambda: log == ["huge"])
    waiting = start_holding(memory, 1 * GiB, log, "small", threading.Event(), cancel)
    time.sleep(0.3)
    cancel.set()
    waiting.join(5)
    assert log == ["huge", "small cancelled"] and memory.holders == 1 and not memory._waiting
    release.set()
    wait_for(lambda: memory.holders == 0)


class RecordingRunner:
    """Answers every job at once and records the bytes reserved on the GPU while it ran."""

    host = None

    def __init__(self, memory: GpuMemory):
        self.memory, self.seen = memory, []

    def call(self, method, params, **_options):
        self.seen.append((method, self.memory.reserved))
        return {}


def softmax_graph(rows: int, columns: int) -> OpGraph:
    spec = TensorSpec((rows, columns), "float32")
    return OpGraph(
        inputs=[GraphInput("x", "user_input", "x", spec)],
        nodes=[OpNode("softmax", "aten.softmax.int", ({"ref": "x"}, -1), {}, (spec,))],
        outputs=[{"ref": "softmax"}],
        returns_tuple=False,
        symbol_hints={},
    )


def test_a_session_reserves_its_tasks_bytes_for_the_jobs_that_hold_tensors_on_the_gpu_only():
    graph = softmax_graph(4096, 393216)  # 6.4 GB in and out
    assert task_gpu_bytes(graph) == GPU_RUNTIME_BYTES + GPU_TENSOR_COPIES * 2 * 4096 * 393216 * 4
    memory = GpuMemory(10000 * GiB)
    runner = RecordingRunner(memory)
    session = WorkerSession(runner, gpu_memory=memory).for_task(graph, "cuda")
    for method in ("capture", "verify", "benchmark", "time_candidates", "sample_model"):
        session.call(method, {}, limits=JobLimits())
    assert runner.seen == [
        ("capture", 0), ("verify", task_gpu_bytes(graph)), ("benchmark", task_gpu_bytes(graph)),
        ("time_candidates", task_gpu_bytes(graph)), ("sample_model", 0),
    ]
    # on the CPU nothing is reserved; a GPU session of its own is made where the GPU's size is known
    assert WorkerSession(runner, gpu_memory=memory).for_task(graph, "cpu").gpu_bytes == 0
    own = WorkerSession(runner).for_task(graph, "cuda", 141 * GiB)
    assert own.gpu_memory is not None and own.gpu_memory.capacity == int(141 * GiB * USABLE_SHARE)
    assert WorkerSession(runner).for_task(graph, "cuda").gpu_memory is None


def test_a_job_cancelled_while_it_waits_for_room_fails_as_cancelled():
    memory = GpuMemory(10 * GiB)
    graph = softmax_graph(1024, 1024)
    cancel = threading.Event()
    session = WorkerSession(RecordingRunner(memory), gpu_memory=memory, cancel=cancel).for_task(graph, "cuda")
    release = threading.Event()
    start_holding(memory, 100 * GiB, [], "other", release)
    wait_for(lambda: memory.holders == 1)
    threading.Timer(0.3, cancel.set).start()
    with pytest.raises(JobFailure) as failure:
        session.call("verify", {}, limits=JobLimits())
    assert failure.value.reason == "cancelled"
    release.set()
