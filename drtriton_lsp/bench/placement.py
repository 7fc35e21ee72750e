"""Where `drtriton bench` runs its problems on this host: one GPU (or the CPU), or several (`--gpus N`), with `--jobs`
problems at a time on each; every GPU has its own lock, so a timing has its GPU alone and never waits for another's.

A problem takes the least busy GPU when it starts; its workers see only that GPU (CUDA_VISIBLE_DEVICES) and its lock.
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any, Callable, Iterator

from drtriton_lsp.engine.gpus import GpuSlot, gpu_slots
from drtriton_lsp.runners.runner import Runner

Progress = Callable[[str], None]
# Makes a problem's runner, given the environment its workers get on top of this process's.
RunnerFactory = Callable[[dict[str, str]], Runner]


class LocalPlaces:
    """The places of a bench on this host, `jobs_per_slot` problems at a time on each; `solve` runs one problem on
    the least busy place (ties: the first), waiting while every place is full."""

    def __init__(self, slots: list[GpuSlot], jobs_per_slot: int, new_runner: RunnerFactory):
        self.slots = slots
        self.jobs_per_slot = jobs_per_slot
        self.new_runner = new_runner
        self.concurrency = len(slots) * jobs_per_slot
        self._running = [0] * len(slots)
        self._condition = threading.Condition()

    def describe(self) -> dict[str, Any]:
        """How the run was placed, as results.json records it."""
        return {"gpus": len(self.slots), "jobs_per_gpu": self.jobs_per_slot}

    @contextlib.contextmanager
    def _take_slot(self) -> Iterator[GpuSlot]:
        with self._condition:
            while min(self._running) >= self.jobs_per_slot:
                self._condition.wait()
            index = self._running.index(min(self._running))
            self._running[index] += 1
        try:
            yield self.slots[index]
        finally:
            with self._condition:
                self._running[index] -= 1
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

        with self._take_slot() as slot:
            def said_where(message: str) -> None:
                progress(f"{slot.label}: {message}" if slot.label else message)

            record = suite.run_problem(
                problem, options, copy_ceiling, said_where, cancel=cancel,
                new_runner=lambda: self.new_runner(slot.env), gpu_memory=slot.memory,
            )
        if slot.label:
            record["placed_on"] = slot.label
        return record


@contextlib.contextmanager
def local_places(
    new_runner: RunnerFactory,
    *,
    gpus: int = 1,
    jobs: int = 1,
    gpu_memory_bytes: int | None = None,
) -> Iterator[LocalPlaces]:
    """This host's places for the block: `gpus` GPUs (the first of those this process sees), `jobs` problems at a time
    on each (engine/gpus.py: the environment, lock and memory of each)."""
    with gpu_slots(gpus, sharing=jobs > 1, gpu_memory_bytes=gpu_memory_bytes) as slots:
        yield LocalPlaces(slots, jobs, new_runner)
