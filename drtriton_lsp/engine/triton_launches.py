"""Count (or suppress) every Triton kernel launch in this process, compiled or interpreted.

Patches `run` on Triton's JIT and interpreter function classes, which every `kernel[grid](...)`
goes through; skipping launches is DRTriton's no-op test ("does the kernel matter?").
"""

from __future__ import annotations

import contextlib
from collections import Counter

from triton.runtime.jit import JITFunction

try:
    from triton.runtime.interpreter import InterpretedFunction
except ImportError:  # Triton builds without the interpreter module
    InterpretedFunction = None


class LaunchCounter:
    """`total` and `by_kernel` count launches since the last `reset()`."""

    def __init__(self) -> None:
        self.total = 0
        self.by_kernel: Counter[str] = Counter()
        self._skip = False

    def reset(self) -> None:
        self.total = 0
        self.by_kernel = Counter()

    @contextlib.contextmanager
    def installed(self):
        classes = [cls for cls in (JITFunction, InterpretedFunction) if cls is not None]
        originals = {cls: cls.run for cls in classes}
        counter = self

        def make_counting_run(original_run):
            def counting_run(kernel, *args, **kwargs):
                if kwargs.get("warmup"):
                    return original_run(kernel, *args, **kwargs)
                counter.total += 1
                counter.by_kernel[_kernel_name(kernel)] += 1
                if counter._skip:
                    return None
                return original_run(kernel, *args, **kwargs)

            return counting_run

        for cls in classes:
            cls.run = make_counting_run(originals[cls])
        try:
            yield self
        finally:
            for cls, original in originals.items():
                cls.run = original

    @contextlib.contextmanager
    def skipping(self):
        """Launches inside this block are counted but not executed."""
        self._skip = True
        try:
            yield
        finally:
            self._skip = False


def _kernel_name(kernel) -> str:
    function = getattr(kernel, "fn", None)
    return getattr(function, "__name__", None) or getattr(kernel, "__name__", type(kernel).__name__)
