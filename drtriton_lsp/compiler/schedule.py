"""Steps of a compiled program that are not kernels: ops the hybrid forward runs as PyTorch calls.

Kernels are `templates.base.KernelPlan`; the program is the run-ordered list of both.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KeptOp:
    """An op left as a PyTorch call. bookkeeping: views, getitem, sym_size and symbolic integer
    math, which run in the hybrid forward where first needed and are not counted as compute.
    layout: the memory layout the op's input is given first ("channels_last"), None to call it as captured."""

    node: str
    op: str
    bookkeeping: bool = False
    layout: str | None = None
