"""Room on the GPU for problems run side by side (`bench --jobs N`): a job that holds a task's tensors on the GPU
(a verification, a benchmark, a search's timing) first reserves the bytes its task needs, and waits while they are not free.

Eight large convolutions verified at once ran the H200 out of memory; with this, jobs that would not fit wait for
others to finish instead, and a task too large to share the GPU runs alone.
"""

from __future__ import annotations

import collections
import contextlib
import threading
from typing import Iterator

from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.engine.memory_caps import task_bytes

# the CUDA contexts, library workspaces (cuBLAS, cuDNN) and Triton of the judge's and the candidate's processes
GPU_RUNTIME_BYTES = 2 * 1024**3
# copies of the task's tensors one verification holds on the GPU at its peak, as measured on the H200: a conv+ReLU+bias
# task of 1.58 GB (128x64x128x128 float32 in) took 29.2 GiB in the judge (the float64 reference and cuDNN's
# workspace for it among them) and 16.7 GiB in each of its two candidate processes, 62.6 GiB in all; twelve copies
# (the host cap's) let eight of them run the GPU out of memory (benchmarks/results/bench-jobs-memory-h200.md)
GPU_TENSOR_COPIES = 40
# what other processes and fragmentation may take: jobs are admitted up to this share of the GPU's memory
USABLE_SHARE = 0.9
# the worker methods whose jobs hold a task's tensors on the GPU
GPU_MEMORY_METHODS = frozenset({"verify", "benchmark", "time_candidates"})
# how often a waiting job looks at the user's cancel
CANCEL_POLL_S = 0.2


def task_gpu_bytes(graph: OpGraph) -> int:
    """The GPU bytes one job on this task may hold at once: the task's tensors as many times over as a verification
    holds them (the float64 reference, both candidate processes' inputs and outputs, library workspaces, what the
    caching allocator keeps), plus the processes' runtime."""
    return GPU_RUNTIME_BYTES + GPU_TENSOR_COPIES * task_bytes(graph)


class GpuMemory:
    """Bytes of one GPU reserved by the jobs running on it, shared by threads of one process. Jobs are admitted in
    the order they asked (a large job waiting is not overtaken by smaller ones forever)."""

    def __init__(self, total_bytes: int):
        self.total_bytes = total_bytes
        self.capacity = int(total_bytes * USABLE_SHARE)
        self.reserved = 0
        self.holders = 0
        self._condition = threading.Condition()
        self._waiting: collections.deque[object] = collections.deque()

    def _fits(self, size: int) -> bool:
        # a job larger than the whole GPU's share still runs, alone
        return self.holders == 0 or self.reserved + size <= self.capacity

    @contextlib.contextmanager
    def hold(self, size: int, cancel: threading.Event | None = None) -> Iterator[bool]:
        """Reserve `size` bytes for the block, waiting until they fit; yields False (and reserves nothing) when
        `cancel` is set while it waits, so the caller's job can be stopped the usual way."""
        ticket = object()
        with self._condition:
            self._waiting.append(ticket)
            while not (self._waiting[0] is ticket and self._fits(size)):
                if cancel is not None and cancel.is_set():
                    break
                self._condition.wait(CANCEL_POLL_S)
            admitted = self._waiting[0] is ticket and self._fits(size)
            self._waiting.remove(ticket)
            if admitted:
                self.reserved += size
                self.holders += 1
            self._condition.notify_all()
        if not admitted:
            yield False
            return
        try:
            yield True
        finally:
            with self._condition:
                self.reserved -= size
                self.holders -= 1
                self._condition.notify_all()
