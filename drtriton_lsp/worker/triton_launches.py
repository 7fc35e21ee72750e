"""Count (or suppress) every Triton kernel launch in this process, compiled or interpreted.

Patches `run` on Triton's JIT and interpreter function classes, which every `kernel[grid](...)` goes through; skipping
launches is DRTriton's no-op test ("does the kernel matter?"). With an audit, PyTorch ops inside a launch (the
interpreter's own copies) are not the candidate's, and each launch's writes are classified (see op_audit). A launch
whose arguments a GPU compilation would refuse (a Python object, whose methods only the CPU interpreter would call)
fails as that compilation would.
"""

from __future__ import annotations

import contextlib
import functools
from collections import Counter
from typing import Callable

import torch
import triton.language as tl
from torch.utils._pytree import tree_flatten
from triton.runtime.jit import JITFunction

from drtriton_lsp.worker.op_audit import CandidateAudit, guard_launch

try:
    from triton.runtime.interpreter import InterpretedFunction
except ImportError:  # Triton builds without the interpreter module
    InterpretedFunction = None

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # a Triton without host tensor descriptors
    TensorDescriptor = None


class LaunchCounter:
    """`total` and `by_kernel` count launches since the last `reset()`; `audit`, when set, watches each launch."""

    def __init__(self) -> None:
        self.total = 0
        self.by_kernel: Counter[str] = Counter()
        self.audit: CandidateAudit | None = None
        self._skip = False

    def reset(self) -> None:
        self.total = 0
        self.by_kernel = Counter()

    def install(self) -> Callable[[], None]:
        """Route every launch through this counter from now on; returns the function that undoes it. The wrappers
        carry the originals' names, so the classes look unchanged to code that prints them."""
        classes = [cls for cls in (JITFunction, InterpretedFunction) if cls is not None]
        originals = {cls: cls.run for cls in classes}
        counter = self

        def make_counting_run(original_run):
            @functools.wraps(original_run)
            def run(kernel, *args, **kwargs):
                problem = _argument_problem(args, kwargs)
                if problem:
                    raise KernelArgumentCompilationError(f"{_kernel_name(kernel)}: {problem}")
                if kwargs.get("warmup"):
                    return original_run(kernel, *args, **kwargs)
                counter.total += 1
                counter.by_kernel[_kernel_name(kernel)] += 1
                if counter._skip:
                    return None
                return counter._launch(original_run, kernel, args, kwargs)

            return run

        for cls in classes:
            cls.run = make_counting_run(originals[cls])

        def uninstall() -> None:
            for cls, original in originals.items():
                cls.run = original

        return uninstall

    def _launch(self, original_run, kernel, args, kwargs):
        audit = self.audit
        if audit is None:
            return original_run(kernel, *args, **kwargs)
        tensors = [value for value in tree_flatten((args, kwargs))[0] if isinstance(value, torch.Tensor)]
        before = guard_launch(audit)
        after = before(tensors) if before is not None else None
        with audit.pause():
            result = original_run(kernel, *args, **kwargs)
            if after is not None and tensors and tensors[0].is_cuda:
                torch.cuda.synchronize(tensors[0].device)
        if after is not None:
            after(tensors)
        return result

    @contextlib.contextmanager
    def skipping(self):
        """Launches inside this block are counted but not executed."""
        self._skip = True
        try:
            yield
        finally:
            self._skip = False


class KernelArgumentCompilationError(TypeError):
    """A kernel argument that no GPU compilation of a Triton kernel accepts. Under the CPU interpreter a kernel body is
    Python, so a kernel that calls a method of an argument object (named like a tensor's or a descriptor's, which the
    static policy cannot tell apart) would run that Python; the launch fails instead, as it would on a GPU."""


# launch options and the grid, which are not the kernel's arguments
LAUNCH_KEYWORDS = frozenset({"grid", "warmup"})


def _argument_problem(args: tuple, kwargs: dict) -> str:
    """What a GPU compilation would refuse among a launch's arguments ("" when nothing)."""
    for name, value in [*enumerate(args), *kwargs.items()]:
        if name not in LAUNCH_KEYWORDS and not _kernel_argument(value):
            where = f"argument {name + 1}" if isinstance(name, int) else f"argument {name!r}"
            return f"{where} is a {type(value).__qualname__}, which no compiled Triton kernel takes"
    return ""


def _kernel_argument(value) -> bool:
    """Tensors, numbers, strings, None, dtypes, tuples of them, constexprs holding any of those (a constexpr holding
    an object would hand the interpreted kernel its methods), and Triton's host tensor descriptors."""
    if value is None or type(value) in (bool, int, float, str):
        return True
    if isinstance(value, tl.constexpr):
        return _kernel_argument(value.value)
    if isinstance(value, (torch.Tensor, torch.dtype, tl.dtype)):
        return True
    if type(value) is tuple:
        return all(_kernel_argument(item) for item in value)
    if TensorDescriptor is not None and type(value) is TensorDescriptor:
        return isinstance(value.base, torch.Tensor)
    return False


def _kernel_name(kernel) -> str:
    function = getattr(kernel, "fn", None)
    return getattr(function, "__name__", None) or getattr(kernel, "__name__", type(kernel).__name__)
