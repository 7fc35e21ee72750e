"""The fusion schedule: which ops run in which Triton kernel, with what launch shape, and which stay.

Plain data plus a deterministic text rendering, one line per kernel or kept op, e.g.
`kernel mlp_block_fused_gelu_mul_add ops=gelu,mul,add domain=[s77,32] block=1024 warps=4`.
"""

from __future__ import annotations

from dataclasses import dataclass

from drtriton_lsp.compiler.graph import Dim

DEFAULT_BLOCK = 1024
DEFAULT_NUM_WARPS = 4


@dataclass(frozen=True)
class FusedKernel:
    """One launch: `wrapper` (a Python function) calls the `@triton.jit` function `kernel`.

    nodes: the graph ops it computes, in graph order; ops: their ATen names, same order.
    inputs: graph values it reads; outputs: the values it stores (read by later ops or returned).
    domain: the shape it iterates over, flattened; block: elements per program.
    """

    wrapper: str
    kernel: str
    nodes: tuple[str, ...]
    ops: tuple[str, ...]
    domain: tuple[Dim, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    block: int = DEFAULT_BLOCK
    num_warps: int = DEFAULT_NUM_WARPS

    def render(self) -> str:
        domain = ",".join(str(dim) for dim in self.domain)
        return (
            f"kernel {self.wrapper} ops={','.join(self.nodes)} domain=[{domain}] "
            f"block={self.block} warps={self.num_warps}"
        )


@dataclass(frozen=True)
class KeptOp:
    """An op left as a PyTorch call. bookkeeping: getitem, sym_size and symbolic integer math,
    which run in the hybrid forward but are not compute and are left out of the schedule text."""

    node: str
    op: str
    bookkeeping: bool = False

    def render(self) -> str:
        return f"keep {self.node} {self.op}"


@dataclass(frozen=True)
class FusionSchedule:
    """All steps of the hybrid forward, in the order they run."""

    steps: tuple[FusedKernel | KeptOp, ...]

    @property
    def kernels(self) -> tuple[FusedKernel, ...]:
        return tuple(step for step in self.steps if isinstance(step, FusedKernel))

    @property
    def kept(self) -> tuple[KeptOp, ...]:
        return tuple(step for step in self.steps if isinstance(step, KeptOp) and not step.bookkeeping)

    def render(self) -> str:
        lines = [step.render() for step in self.steps if not (isinstance(step, KeptOp) and step.bookkeeping)]
        return "\n".join(lines) + "\n" if lines else ""
