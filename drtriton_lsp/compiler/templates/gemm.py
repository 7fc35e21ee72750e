"""The blocked-GEMM pieces the matmul and conv templates share: how tiles are multiplied (`PRECISION`, `dot_lines`)
and said in a docstring, and the anchor's value and epilogue ops on an output tile.
"""

from __future__ import annotations

from drtriton_lsp.compiler.names import NameScope
from drtriton_lsp.compiler.templates.base import KernelPlan, RenderContext, choice
from drtriton_lsp.compiler.templates.pointwise import INDENT, elementwise_lines, stored

# characters per line of a GEMM kernel's docstring text (the kernels writer.KernelWriter lays out wrap at 96)
GEMM_DOCSTRING_WIDTH = 100
# how tl.dot multiplies float32 tiles; shared by the templates built on it (matmul, conv)
PRECISION = choice(
    "precision",
    ("ieee", "tf32"),
    "float32 operands: ieee multiplies exactly (the default), tf32 on TF32 tensor cores (faster, about "
    "1e-3 relative error); float16/bfloat16 operands always use tensor cores with float32 accumulation",
)


def products_text(dtype: str, precision: str) -> str:
    """How a kernel's tiles are multiplied, for its docstring."""
    if dtype != "float32":
        return f"{dtype} tensor-core products"
    if precision == "tf32":
        return "TF32 tensor-core products, about 1e-3 relative error"
    return "exact float32 products"


def dot_lines(left_tile: str, right_tile: str, dtype: str, precision: str) -> list[str]:
    """Statements adding the product of two tiles of `dtype` into the float32 tile `acc`.

    float32 multiplies as `precision` says ("ieee": exactly); float16 and bfloat16 use tensor cores.
    A bfloat16 kernel takes a WIDEN_BFLOAT16 constexpr, true for CPU tensors (only Triton's interpreter runs
    kernels on them); the candidate never reads Triton's settings, which the verifier's policy forbids.
    """
    if dtype == "float32":
        return [f'acc = tl.dot({left_tile}, {right_tile}, acc, input_precision="{precision}")']
    if dtype == "float16":
        return [f"acc = tl.dot({left_tile}, {right_tile}, acc)"]
    return [
        "if WIDEN_BFLOAT16:",
        f"{INDENT}# Triton's CPU interpreter multiplies bfloat16 tiles as raw integers; widened to float32",
        f"{INDENT}# the products are the same, and exact",
        f'{INDENT}acc = tl.dot({left_tile}.to(tl.float32), {right_tile}.to(tl.float32), acc, input_precision="ieee")',
        "else:",
        f"{INDENT}acc = tl.dot({left_tile}, {right_tile}, acc)",
    ]


def tile_epilogue_lines(
    plan: KernelPlan, expression: str, dtype: str, variables: dict[str, str], scope: NameScope, context: RenderContext
) -> list[str]:
    """Statements computing the anchor's value on an output tile (`expression` of `acc`) and then the
    epilogue ops, in float32; the value is rounded to `dtype` first when an epilogue op reads it."""
    anchor = plan.anchor
    lines: list[str] = []
    if expression == "acc":
        variables[anchor] = "acc"
    else:
        variables[anchor] = scope.fresh(anchor)
        lines.append(f"{variables[anchor]} = {expression}")
    nodes = {node.name: node for node in context.graph.nodes}
    if dtype != "float32" and any(anchor in nodes[member].input_refs() for member in plan.epilogue):
        variable = variables[anchor]
        lines += [
            f"# round to {dtype} before the epilogue reads it, as PyTorch does",
            f"{variable} = {stored(variable, dtype)}.to(tl.float32)",
        ]
    return lines + elementwise_lines(context.graph, plan.epilogue, variables, scope, context.helpers)
