"""Where `drtriton bench` runs its problems on this host: one GPU (or the CPU), or several (`--gpus N`), with `--jobs`
problems at a time on each; every GPU has its own lock, so a timing has its GPU alone and never waits for another's.

A problem takes the least busy GPU when it starts; its workers see only that GPU (CUDA_VISIBLE_DEVICES) and its lock.
With several problems at a time on a GPU, each also runs on CPUs of its own (`cpu_shares`): a host-bound module's
timing is its host's speed, and other problems' captures and compiles could take every core
(bench-h200-models-2026-12-04.md, host-and-replay-h200-2026-12-04.md).
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path
from typing import Any, Callable, Iterator

from drtriton_lsp.engine.gpus import GpuSlot, gpu_slots
from drtriton_lsp.runners.protocol import CPU_SET_VARIABLE
from drtriton_lsp.runners.runner import Runner

Progress = Callable[[str], None]
# Makes a problem's runner, given the environment its workers get on top of this process's.
RunnerFactory = Callable[[dict[str, str]], Runner]


class LocalPlaces:
    """The places of a bench on this host, `jobs_per_slot` problems at a time on each; `solve` runs one problem on
    the least busy place (ties: the first), waiting while every place is full."""

    def __init__(self, slots: list[GpuSlot], jobs_per_slot: int, new_runner: RunnerFactory, *, share_cpus: bool = False):
        self.slots = slots
        self.jobs_per_slot = jobs_per_slot
        self.new_runner = new_runner
        self.concurrency = len(slots) * jobs_per_slot
        self._running = [0] * len(slots)
        shares = cpu_shares(self.concurrency) if share_cpus else []
        self._share_sizes = [len(share) for share in shares]
        self._free_shares = [share_environment(share) for share in shares]
        self._condition = threading.Condition()

    def describe(self) -> dict[str, Any]:
        """How the run was placed, as results.json records it (with the CPUs of each problem's share, when shared)."""
        placement: dict[str, Any] = {"gpus": len(self.slots), "jobs_per_gpu": self.jobs_per_slot}
        if self._share_sizes:
            placement["cpus_per_job"] = self._share_sizes
        return placement

    @contextlib.contextmanager
    def _take_slot(self) -> Iterator[tuple[GpuSlot, dict[str, str]]]:
        """A place with room (the least busy), and the environment of the CPUs the problem gets ({}: no share)."""
        with self._condition:
            while min(self._running) >= self.jobs_per_slot:
                self._condition.wait()
            index = self._running.index(min(self._running))
            self._running[index] += 1
            share = self._free_shares.pop(0) if self._free_shares else {}
        try:
            yield self.slots[index], share
        finally:
            with self._condition:
                self._running[index] -= 1
                if share:
                    self._free_shares.append(share)
                self._condition.notify_all()

    def solve(
        self,
        problem: Any,
        options: Any,
        copy_ceiling: dict[str, Any] | None,
        progress: Progress,
        cancel: threading.Event,
    ) -> dict[str, Any]:
        """Run one problem (bench.suite.run_problem) on a free place; its record says which place when there are
        several."""
        from drtriton_lsp.bench import suite

        with self._take_slot() as (slot, share):
            def said_where(message: str) -> None:
                progress(f"{slot.label}: {message}" if slot.label else message)

            record = suite.run_problem(
                problem, options, copy_ceiling, said_where, cancel=cancel,
                new_runner=lambda: self.new_runner({**slot.env, **share}), gpu_memory=slot.memory,
            )
        if slot.label:
            record["placed_on"] = slot.label
        return record


def cpu_shares(count: int) -> list[list[int]]:
    """This process's CPUs in `count` shares of whole cores (a core's hardware threads stay in one share; the first
    shares take one core more when they do not divide evenly); [] for fewer than two shares, or fewer cores than
    shares."""
    cpus = sorted(os.sched_getaffinity(0))
    cores: dict[tuple[int, ...], list[int]] = {}
    for cpu in cpus:
        cores.setdefault(_core_of(cpu), []).append(cpu)
    if count < 2 or len(cores) < count:
        return []
    ordered = sorted(cores.values())
    size, extra = divmod(len(ordered), count)
    shares, start = [], 0
    for index in range(count):
        end = start + size + (1 if index < extra else 0)
        shares.append(sorted(cpu for core in ordered[start:end] for cpu in core))
        start = end
    return shares


def _core_of(cpu: int) -> tuple[int, ...]:
    """The hardware threads of `cpu`'s core, as Linux lists them; (cpu,) where it does not say."""
    siblings = Path(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list")
    try:
        text = siblings.read_text().strip()
    except OSError:
        return (cpu,)
    threads: list[int] = []
    for part in text.split(","):
        low, _, high = part.partition("-")
        threads += range(int(low), int(high or low) + 1)
    return tuple(threads)


def share_environment(cpus: list[int]) -> dict[str, str]:
    """The environment of a problem's workers on `cpus`: the CPU set they keep to (worker.main), and thread pools
    (OpenMP, MKL, torch.compile's compile workers) of that size."""
    threads = str(len(cpus))
    return {
        CPU_SET_VARIABLE: ",".join(map(str, cpus)),
        "OMP_NUM_THREADS": threads,
        "MKL_NUM_THREADS": threads,
        "TORCHINDUCTOR_COMPILE_THREADS": threads,
    }


@contextlib.contextmanager
def local_places(
    new_runner: RunnerFactory,
    *,
    gpus: int = 1,
    jobs: int = 1,
    gpu_memory_bytes: int | None = None,
    share_cpus: bool = False,
) -> Iterator[LocalPlaces]:
    """This host's places for the block: `gpus` GPUs (the first of those this process sees), `jobs` problems at a time
    on each (engine/gpus.py: the environment, lock and memory of each); share_cpus: each problem at a time gets CPUs
    of its own (for runs that time on a GPU)."""
    with gpu_slots(gpus, sharing=jobs > 1, gpu_memory_bytes=gpu_memory_bytes) as slots:
        yield LocalPlaces(slots, jobs, new_runner, share_cpus=share_cpus)
