"""The Runner seam: what the engine, the CLI and the language server ask of whatever runs their worker jobs.

Two runners implement it: `LocalRunner` (worker processes on this machine) and `SshRunner` (on a GPU host, over ssh).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Protocol

import psutil

# The share of the machine's memory a job may hold: room is left for the system and the caller, and a runaway job is
# stopped before the machine runs out (callers that know a job's needs set a lower cap).
MACHINE_MEMORY_SHARE = 0.8
# where a container's memory limit is written (cgroup v2, then v1); "max" or a huge number means none
CGROUP_MEMORY_LIMITS = (Path("/sys/fs/cgroup/memory.max"), Path("/sys/fs/cgroup/memory/memory.limit_in_bytes"))

# Reasons a job failed that say nothing about the job itself: the runner could not run it (see JobFailure.runner_fault).
RUNNER_FAULTS = frozenset({"connection_lost", "remote_setup"})


class JobFailure(Exception):
    """The job's process did not return a result.

    reason: "timeout" | "crashed" | "memory_limit" | "cancelled" | "worker_error", or a runner fault:
    "connection_lost" (the ssh connection failed or ended mid-job) | "remote_setup" (the remote host could not start
    a worker). hint: what to check, for a failure the user can fix ("" when the stderr tail says enough).
    """

    def __init__(self, reason: str, detail: str, stderr_tail: str = "", hint: str = ""):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.stderr_tail = stderr_tail
        self.hint = hint

    @property
    def runner_fault(self) -> bool:
        """The job never got a fair run (no verdict on a candidate can be drawn from this failure)."""
        return self.reason in RUNNER_FAULTS


def machine_memory_cap() -> int:
    """The most memory a job may hold on this machine: MACHINE_MEMORY_SHARE of its memory (of the container's limit,
    when it runs in one with less)."""
    return int(machine_memory_bytes() * MACHINE_MEMORY_SHARE)


def machine_memory_bytes() -> int:
    """The memory this process's machine or container has."""
    total = psutil.virtual_memory().total
    for path in CGROUP_MEMORY_LIMITS:
        try:
            limit = path.read_text().strip()
        except OSError:
            continue
        if limit.isdigit():
            total = min(total, int(limit))
    return total


@dataclass
class JobLimits:
    """timeout_s: wall-clock seconds; memory_bytes: resident memory of the worker and its children (None: the
    machine's cap, `machine_memory_cap()`, which also bounds a cap given here)."""

    timeout_s: float = 300.0
    memory_bytes: int | None = None

    def memory_cap(self) -> int:
        """The resident bytes the job may use on the machine that enforces it (where its worker runs: the remote
        host of an ssh runner computes this there)."""
        if self.memory_bytes is None:
            return machine_memory_cap()
        return min(self.memory_bytes, machine_memory_cap())


class Runner(Protocol):
    """Runs each job in a worker process of its own, and can start workers ahead of the jobs that will use them.

    host: where the workers run, as the user named it (e.g. "ssh://gpu-box"); None for this machine.
    Use a runner as a context manager (or `close` it): closing kills the workers started ahead that no job took.
    """

    @property
    def host(self) -> str | None: ...

    def call(
        self,
        method: str,
        params: dict[str, Any],
        *,
        limits: JobLimits | None = None,
        env: dict[str, str | None] | None = None,
        python_path: list[str] | None = None,
        on_progress: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        prepare_next: dict[str, str | None] | None = None,
        prepare_next_for: str | None = None,
    ) -> Any:
        """Run `method` in a worker and return its result; raise JobFailure (no result) or DrtritonError (the job
        refused its input). env: variables set (None: removed) for the worker; python_path: folders put first on
        its import path; prepare_next / prepare_next_for: the env and method of a job known to follow, whose
        worker starts meanwhile."""
        ...

    def prepare(
        self,
        *,
        env: dict[str, str | None] | None = None,
        python_path: list[str] | None = None,
        method: str | None = None,
        on_start: Callable[[int], None] | None = None,
    ) -> None:
        """Start a worker now for a later `call` with this env and python_path (and method, when known)."""
        ...

    def take_spare_from(self, other: Runner) -> None:
        """Take over the workers `other` started ahead; closing this runner kills those no job took."""
        ...

    def close(self) -> None:
        """Kill the workers started ahead, and those of calls still in flight (which raise JobFailure "cancelled")."""
        ...

    def __enter__(self) -> Runner: ...

    def __exit__(self, *exc_info: object) -> None: ...
