"""This host's GPUs as separate places for worker jobs (`bench --gpus N`, `optimize --search --gpus N`): each place's
workers see one GPU (CUDA_VISIBLE_DEVICES) and take its own lock file, so a timing never shares its GPU.

Which GPUs: the first N of those this process sees ($CUDA_VISIBLE_DEVICES when it is set, else 0 .. N-1).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from drtriton_lsp.engine.gpu_memory import GpuMemory
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.protocol import GPU_LOCK_VARIABLE

# The variable the CUDA runtime reads to pick the GPUs a process sees.
VISIBLE_GPUS_VARIABLE = "CUDA_VISIBLE_DEVICES"


@dataclass(frozen=True)
class GpuSlot:
    """One place jobs run: its name in progress and results (None when there is one place), the environment its
    workers get (the GPU they see, the lock that keeps its timings alone), and its memory shared by its jobs (None:
    not shared)."""

    label: str | None
    env: dict[str, str]
    memory: GpuMemory | None


@contextlib.contextmanager
def gpu_slots(count: int, *, sharing: bool, gpu_memory_bytes: int | None) -> Iterator[list[GpuSlot]]:
    """`count` places on this host's GPUs for the block (one place, the default GPU, when `count` is 1).

    sharing: several jobs run at once on each place (each then gets a lock file, and with `gpu_memory_bytes` a memory
    account of that size). Lock files live in a folder removed at the end; a lock the caller set ($DRTRITON_GPU_LOCK)
    is kept on a single place."""
    gpu_ids: list[str | None] = list(visible_gpu_ids(count)) if count > 1 else [None]
    with tempfile.TemporaryDirectory(prefix="drtriton-gpu-locks-") as directory:
        slots = []
        for number, gpu_id in enumerate(gpu_ids):
            env: dict[str, str] = {}
            if gpu_id is not None:
                env[VISIBLE_GPUS_VARIABLE] = gpu_id
            if gpu_id is not None or (sharing and not os.environ.get(GPU_LOCK_VARIABLE)):
                env[GPU_LOCK_VARIABLE] = str(Path(directory) / f"gpu{number}.lock")
            memory = GpuMemory(gpu_memory_bytes) if sharing and gpu_memory_bytes else None
            slots.append(GpuSlot(f"GPU {gpu_id}" if gpu_id is not None else None, env, memory))
        yield slots


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
