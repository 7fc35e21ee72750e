"""One GPU shared by several worker processes: verifications and captures run side by side, a timing runs alone.

The lock is a pair of files named by $DRTRITON_GPU_LOCK (flock); without it a hold does nothing (one job at a time).
"""

from __future__ import annotations

import contextlib
import os
from typing import Iterator

from drtriton_lsp.runners.protocol import GPU_LOCK_VARIABLE


@contextlib.contextmanager
def gpu_hold(*, exclusive: bool) -> Iterator[None]:
    """Hold the GPU: shared (verification, capture) or exclusive (timing), across every process given the same lock.

    A waiting exclusive hold keeps the turnstile, so verifications that arrive later wait behind it
    instead of keeping a timing waiting for ever.
    """
    path = os.environ.get(GPU_LOCK_VARIABLE)
    if not path:
        yield
        return
    import fcntl  # POSIX only, like the worker processes that share a GPU

    with open(path + ".turnstile", "a") as turnstile, open(path, "a") as gate:
        fcntl.flock(turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(gate, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        finally:
            fcntl.flock(turnstile, fcntl.LOCK_UN)
        try:
            yield
        finally:
            fcntl.flock(gate, fcntl.LOCK_UN)
