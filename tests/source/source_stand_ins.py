"""Stand-ins for the source-layer tests: a compiled program with the fields the source layer reads.

Real programs come from compiler.codegen.CompiledProgram; these only need the same shape.
"""

from dataclasses import dataclass


@dataclass(frozen=True)
class StandInProgram:
    kernel_block: str
    forward_function: str
    required_imports: tuple[str, ...] = ("import torch", "import triton", "import triton.language as tl")
    replay: bool = False


def relu_program(prefix: str) -> StandInProgram:
    """A tiny relu kernel and a forward function that records that it ran (then returns -1s)."""
    kernel_block = f'''
@triton.jit
def {prefix}_relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n  # mask guards the last block
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0), mask=mask)


TRITON_CALLS = []


def {prefix}_triton_forward(self, x, *rest, **options):
    TRITON_CALLS.append("{prefix}")
    return torch.full_like(x, -1.0)
'''
    return StandInProgram(kernel_block, f"{prefix}_triton_forward")


def launching_relu_program(prefix: str, wrong: bool = False) -> StandInProgram:
    """A relu kernel and a forward that launches it (`wrong`: and then returns its input instead)."""
    kernel_block = f'''
@triton.jit
def {prefix}_relu_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n  # mask guards the last block
    tl.store(out_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)


def {prefix}_triton_forward(self, x, *, drtriton_module_tensors=None):
    x = x.contiguous()
    out = torch.empty_like(x)
    {prefix}_relu_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
    return {"x" if wrong else "out"}
'''
    return StandInProgram(kernel_block, f"{prefix}_triton_forward")
