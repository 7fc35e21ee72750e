"""A worker session: what every worker job of one request shares (the runner, the user's folder on the workers' path,
each kind of job's limits, where progress goes, and the user's cancel), built once by the CLI, the server or bench.

The pipeline, the search and the verifier take a session instead of the loose values; `WorkerSession.run` turns a
failed job into what a user reads (Cancelled, or a DrtritonError that names the worker).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.engine.gpu_memory import GPU_MEMORY_METHODS, GpuMemory, task_gpu_bytes
from drtriton_lsp.engine.gpus import gpu_slots
from drtriton_lsp.engine.memory_caps import with_task_memory_caps
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.local import LocalRunner, worker_python_path
from drtriton_lsp.runners.runner import JobFailure, JobLimits, Runner

Progress = Callable[[str], None]


class Cancelled(Exception):
    """The user cancelled the job; nothing was judged."""


@dataclass(frozen=True)
class WorkerLimits:
    """The time and memory each kind of worker job may take (memory None: the machine's cap, see JobLimits).

    capabilities: the devices check; capture: torch.export; verify: one judge's job (a search's verifications too);
    benchmark: timing a candidate against eager PyTorch and torch.compile (a search's timings too).
    """

    capabilities: JobLimits = field(default_factory=lambda: JobLimits(timeout_s=120))
    capture: JobLimits = field(default_factory=lambda: JobLimits(timeout_s=180))
    verify: JobLimits = field(default_factory=lambda: JobLimits(timeout_s=600))
    benchmark: JobLimits = field(default_factory=lambda: JobLimits(timeout_s=900))

    def for_task(self, graph: OpGraph) -> WorkerLimits:
        """These limits with the memory of verification and timing capped by the task's size (engine/memory_caps):
        both may hold the task's tensors several times over."""
        verify, benchmark = with_task_memory_caps(self.verify, graph), with_task_memory_caps(self.benchmark, graph)
        return dataclasses.replace(self, verify=verify, benchmark=benchmark)


@dataclass(frozen=True)
class WorkerSession:
    """What every worker job of one request needs.

    runner: where the workers run; python_path: folders put first on the workers' import path (the user's folder,
    so a task imports its neighbours; None: none); limits: per kind of job; progress: where the job's steps and the
    workers' progress go (None: nowhere); cancel: set by the user to stop the request (None: it cannot be cancelled);
    gpu_memory: the GPU's room shared with requests run side by side (None: this request has the GPU to itself), and
    gpu_bytes: what each of this request's jobs that hold the task's tensors reserves of it (engine/gpu_memory.py).
    """

    runner: Runner
    python_path: list[str] | None = None
    limits: WorkerLimits = field(default_factory=WorkerLimits)
    progress: Progress | None = None
    cancel: threading.Event | None = None
    gpu_memory: GpuMemory | None = None
    gpu_bytes: int = 0

    @classmethod
    def for_file(
        cls,
        runner: Runner,
        path: str | None,
        *,
        limits: WorkerLimits | None = None,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        gpu_memory: GpuMemory | None = None,
    ) -> WorkerSession:
        """A session for jobs on the user's file at `path` (None: a source with no file), whose folder the workers
        import from."""
        return cls(runner, worker_python_path(path), limits or WorkerLimits(), progress, cancel, gpu_memory)

    def for_task(self, graph: OpGraph, device: str, gpu_total_bytes: int | None = None) -> WorkerSession:
        """This session once the task's graph and device are known: verification and timing capped by the task's
        size, and on a GPU (of `gpu_total_bytes`), the room those jobs reserve there (a search's verifications run
        side by side; a session without a GPU shared with other requests gets one of its own)."""
        limits = self.limits.for_task(graph)
        if device != "cuda" or (self.gpu_memory is None and not gpu_total_bytes):
            return dataclasses.replace(self, limits=limits)
        gpu_memory = self.gpu_memory or GpuMemory(gpu_total_bytes)
        return dataclasses.replace(self, limits=limits, gpu_memory=gpu_memory, gpu_bytes=task_gpu_bytes(graph))

    @contextlib.contextmanager
    def on_each_gpu(self, count: int) -> Iterator[list[WorkerSession]]:
        """This session once for each of the first `count` GPUs of this host, for the block: each one's workers see
        their GPU alone and take its lock, with room on it of their own (`count` 1: this session alone, unchanged).
        Only for workers on this machine: a DrtritonError for a remote runner."""
        if count <= 1:
            yield [self]
            return
        runner = self.runner
        if type(runner) is not LocalRunner:
            raise DrtritonError(
                f"--gpus {count} spreads the work over this machine's GPUs, but the workers run on {runner.host}",
                "leave out --gpus with --remote",
            )
        total_bytes = self.gpu_memory.total_bytes if self.gpu_memory is not None else None
        with gpu_slots(count, sharing=True, gpu_memory_bytes=total_bytes) as slots, contextlib.ExitStack() as runners:
            sessions = []
            for slot in slots:
                gpu_runner = runners.enter_context(LocalRunner(runner.python, {**runner.extra_env, **slot.env}))
                sessions.append(dataclasses.replace(self, runner=gpu_runner, gpu_memory=slot.memory))
            yield sessions

    def step(self, message: str) -> None:
        """Say what the request is doing now."""
        if self.progress is not None:
            self.progress(message)

    def cancelled(self) -> bool:
        return self.cancel is not None and self.cancel.is_set()

    def side_jobs(self, stop: threading.Event | None) -> WorkerSession:
        """This session for jobs run side by side within one step (a search's verifications): their progress is not
        shown, and `stop` (a search's deadline or the user's cancel, whichever comes first) stops them."""
        return dataclasses.replace(self, progress=None, cancel=stop)

    def call(
        self,
        method: str,
        params: dict[str, Any],
        *,
        limits: JobLimits,
        env: dict[str, str | None] | None = None,
        prepare_next: dict[str, str | None] | None = None,
        prepare_next_for: str | None = None,
    ) -> Any:
        """`Runner.call` with this session's path, progress and cancel: raises JobFailure when no result came. On a
        shared GPU, a job that holds the task's tensors waits for room there first."""
        room = (
            self.gpu_memory.hold(self.gpu_bytes, self.cancel)
            if self.gpu_memory is not None and self.gpu_bytes and method in GPU_MEMORY_METHODS
            else contextlib.nullcontext(True)
        )
        with room as admitted:
            if not admitted:
                raise JobFailure("cancelled", "cancelled while it waited for room on the GPU")
            return self.runner.call(
                method, params, limits=limits, env=env, python_path=self.python_path, on_progress=self.progress,
                cancel=self.cancel, prepare_next=prepare_next, prepare_next_for=prepare_next_for,
            )

    def run(
        self,
        method: str,
        params: dict[str, Any],
        *,
        limits: JobLimits,
        env: dict[str, str | None] | None = None,
        prepare_next: dict[str, str | None] | None = None,
        prepare_next_for: str | None = None,
    ) -> Any:
        """`call`, for a job whose failure ends the request: a cancel raises Cancelled, any other failure a
        DrtritonError that names the worker and shows its last output."""
        try:
            return self.call(
                method, params, limits=limits, env=env, prepare_next=prepare_next, prepare_next_for=prepare_next_for
            )
        except JobFailure as failure:
            if failure.reason == "cancelled":
                raise Cancelled() from failure
            raise DrtritonError(
                f"the {method} worker failed: {failure.detail}",
                (failure.hint or "the worker's last output is below; this is the user's module or an environment problem")
                + (f"\n{failure.stderr_tail}" if failure.stderr_tail else ""),
            ) from failure
