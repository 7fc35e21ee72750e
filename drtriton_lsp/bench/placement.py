"""Where `drtriton bench` runs its problems on this host: one GPU (or the CPU), or several (`--gpus N`), with `--jobs`
problems at a time on each; every GPU has its own lock, so a timing has its GPU alone and never waits for another's.

A problem takes the least busy GPU when it starts; its workers see only that GPU (CUDA_VISIBLE_DEVICES) and its lock.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

from drtriton_lsp.engine.gpu_memory import GpuMemory
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.protocol import GPU_LOCK_VARIABLE
from drtriton_lsp.runners.runner import Runner

# The variable the CUDA runtime reads to pick the GPUs a process sees.
VISIBLE_GPUS_VARIABLE = "CUDA_VISIBLE_DEVICES"

Progress = Callable[[str], None]
# Makes a problem's runner, given the environment its workers get on top of this process's.
RunnerFactory = Callable[[dict[str, str]], Runner]


@dataclass(frozen=True)
class GpuSlot:
    """One place problems run: its name in progress and results (None when the bench has one place), the environment
    its workers get (the GPU they see, the lock that keeps its timings alone), and its memory shared by its problems."""

    label: str | None
    env: dict[str, str]
    memory: GpuMemory | None


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
        """Run one problem (bench.suite.run_problem) on a free place; its record says which place when there are several."""
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
    on each. Lock files (one per GPU, where problems share it or GPUs are several) live in a folder removed at the end;
    a lock the caller already set ($DRTRITON_GPU_LOCK) is kept on a single GPU."""
    gpu_ids = visible_gpu_ids(gpus) if gpus > 1 else [None]
    with tempfile.TemporaryDirectory(prefix="drtriton-gpu-locks-") as directory:
        slots = []
        for number, gpu_id in enumerate(gpu_ids):
            env: dict[str, str] = {}
            if gpu_id is not None:
                env[VISIBLE_GPUS_VARIABLE] = gpu_id
            if gpu_id is not None or (jobs > 1 and not os.environ.get(GPU_LOCK_VARIABLE)):
                env[GPU_LOCK_VARIABLE] = str(Path(directory) / f"gpu{number}.lock")
            memory = GpuMemory(gpu_memory_bytes) if jobs > 1 and gpu_memory_bytes else None
            label = f"GPU {gpu_id}" if gpu_id is not None else None
            slots.append(GpuSlot(label, env, memory))
        yield LocalPlaces(slots, jobs, new_runner)


def visible_gpu_ids(count: int) -> list[str]:
    """The ids (for CUDA_VISIBLE_DEVICES) of the first `count` GPUs this process sees: those $CUDA_VISIBLE_DEVICES
    names when it is set, else 0 .. count-1."""
    visible = os.environ.get(VISIBLE_GPUS_VARIABLE)
    ids = [part.strip() for part in visible.split(",") if part.strip()] if visible else [str(i) for i in range(count)]
    if len(ids) < count:
        raise DrtritonError(
            f"--gpus {count}, but {VISIBLE_GPUS_VARIABLE}={visible} names only {len(ids)}",
            f"pass --gpus {len(ids)} or fewer, or widen {VISIBLE_GPUS_VARIABLE}",
        )
    return ids[:count]


def check_gpu_count(requested: int, device: str, devices: dict[str, Any]) -> None:
    """Refuse `--gpus N` the worker's machine cannot give: N above 1 without a GPU, or above its GPU count."""
    if requested <= 1:
        return
    if device != "cuda":
        raise DrtritonError(f"--gpus {requested} needs CUDA GPUs; this run is on the {device}", "leave out --gpus")
    available = devices.get("cuda_device_count") or 1
    if requested > available:
        raise DrtritonError(
            f"--gpus {requested}, but the worker sees {available} GPU{'s' if available != 1 else ''}",
            f"pass --gpus {available} or fewer",
        )
