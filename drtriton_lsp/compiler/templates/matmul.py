"""The matmul template: mm, bmm, addmm, linear, matmul and matmul-shaped einsum as one blocked Triton GEMM.

Operands are read through their strides (a transposed weight is never copied); pointwise epilogue ops
(bias, scaling, activations, residual adds, clamps) run on each output tile before it is stored.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from drtriton_lsp.compiler.elementwise import FUSIBLE_DTYPES, bind_arguments, float_literal
from drtriton_lsp.compiler.graph import Dim, OpGraph, OpNode, TensorSpec
from drtriton_lsp.compiler.names import NameScope
from drtriton_lsp.compiler.templates.base import (
    AnchorShape,
    KernelPlan,
    ParameterSpec,
    RenderContext,
    Template,
    choice,
    power_of_two,
    tile,
)
from drtriton_lsp.compiler.templates.pointwise import (
    INDENT,
    DomainReads,
    domain_text,
    elementwise_lines,
    flat_index_lines,
    stored,
)

# streaming multiprocessors of an NVIDIA H200: fewer output tiles than this leave SMs idle
H200_SMS = 132
# what a symbolic size is taken to be when the graph has no example value for it
UNKNOWN_SIZE = 1024
# names the kernel body spells literally; taken first, so a graph value with one of them is renamed
KERNEL_NAMES = (
    "pid", "tiles_m", "tiles_n", "tiles_per_batch", "tiles_in_group", "first_tile_m", "group_rows",
    "tile_m", "tile_n", "batch", "rows", "cols", "ks", "k", "k_start", "acc", "mask", "out_offsets",
    "M", "N", "K", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "WIDEN_BFLOAT16",
)  # fmt: skip


def whole_number(name: str, low: int, high: int, doc: str) -> ParameterSpec:
    """An integer in [low, high], written in decimal."""

    def parse(text: str) -> int:
        if not text.isdigit() or text != str(int(text)):
            raise ValueError(f"expected a decimal integer, got {text!r}")
        value = int(text)
        if not low <= value <= high:
            raise ValueError(f"expected an integer from {low} to {high}, got {value}")
        return value

    return ParameterSpec(name, parse, str, doc)


@dataclass(frozen=True)
class MatmulForm:
    """An anchor op read as out[batch..., rows..., n] = sum_k left[batch..., rows..., k] * right[batch..., k, n].

    left/right: the graph values multiplied. left_order/right_order: the permutation (a view, no copy)
    that lays them out so, None when they already are. batch_rank: leading output dims the grid walks
    one product at a time (an operand lacking one, or of size 1 there, broadcasts over it); the output
    dims between the batch and n are flattened into the product's rows. addend: a value broadcast into
    the output and added after the product (linear's bias, addmm's input): alpha * product + beta * addend.
    """

    left: str
    right: str
    left_order: tuple[int, ...] | None
    right_order: tuple[int, ...] | None
    batch_rank: int
    addend: str | None = None
    alpha: float = 1
    beta: float = 1


def matmul_form(node: OpNode, graph: OpGraph) -> MatmulForm | None:
    """The op as a (batched) matrix product if this template computes it exactly as PyTorch does, else None."""
    if node.op not in FORM_READERS or len(node.outputs) != 1:
        return None
    form = FORM_READERS[node.op](bind_arguments(node), graph)
    return form if form is not None and _fits(form, node.spec, graph) else None


def _ref(value: Any) -> str | None:
    return value["ref"] if isinstance(value, dict) and "ref" in value else None


def _rank(graph: OpGraph, value: str | None) -> int:
    spec = graph.spec_of(value) if value is not None else None
    return spec.rank if spec is not None else -1


def _mm_form(bound: dict[str, Any], graph: OpGraph) -> MatmulForm | None:
    left, right = _ref(bound["self"]), _ref(bound["mat2"])
    if _rank(graph, left) != 2 or _rank(graph, right) != 2:
        return None
    return MatmulForm(left, right, None, None, batch_rank=0)


def _bmm_form(bound: dict[str, Any], graph: OpGraph) -> MatmulForm | None:
    left, right = _ref(bound["self"]), _ref(bound["mat2"])
    if _rank(graph, left) != 3 or _rank(graph, right) != 3:
        return None
    return MatmulForm(left, right, None, None, batch_rank=1)


def _addmm_form(bound: dict[str, Any], graph: OpGraph) -> MatmulForm | None:
    left, right, addend = _ref(bound["mat1"]), _ref(bound["mat2"]), _ref(bound["self"])
    alpha, beta = bound["alpha"], bound["beta"]
    if _rank(graph, left) != 2 or _rank(graph, right) != 2 or addend is None:
        return None
    if not all(isinstance(scale, (int, float)) and not isinstance(scale, bool) for scale in (alpha, beta)):
        return None
    if not (math.isfinite(alpha) and math.isfinite(beta)):
        return None
    # beta = 0: PyTorch ignores the input entirely (a NaN in it does not propagate)
    return MatmulForm(left, right, None, None, batch_rank=0, addend=addend if beta != 0 else None, alpha=alpha, beta=beta)


def _linear_form(bound: dict[str, Any], graph: OpGraph) -> MatmulForm | None:
    left, weight, bias = _ref(bound["input"]), _ref(bound["weight"]), bound["bias"]
    if _rank(graph, left) < 2 or _rank(graph, weight) != 2 or (bias is not None and _ref(bias) is None):
        return None
    # out = input @ weight.T (+ bias): the weight is read as [K, N] through swapped strides
    return MatmulForm(left, weight, None, (1, 0), batch_rank=0, addend=_ref(bias))


def _matmul_form(bound: dict[str, Any], graph: OpGraph) -> MatmulForm | None:
    left, right = _ref(bound["self"]), _ref(bound["other"])
    left_rank, right_rank = _rank(graph, left), _rank(graph, right)
    if left_rank < 2 or right_rank < 2:
        return None  # a 1-D operand is a matrix-vector product: it stays in PyTorch
    if right_rank == 2:
        # [..., M, K] @ [K, N]: every leading dim of the left operand is a row of one product
        return MatmulForm(left, right, None, None, batch_rank=0)
    return MatmulForm(left, right, None, None, batch_rank=max(left_rank, right_rank) - 2)


def _einsum_form(bound: dict[str, Any], graph: OpGraph) -> MatmulForm | None:
    """Two-operand einsum with explicit output "batch..., rows..., n" and one contracted letter."""
    equation, tensors = bound["equation"], bound["tensors"]
    if not isinstance(equation, str) or not isinstance(tensors, dict) or len(tensors.get("list", ())) != 2:
        return None
    operands = [_ref(value) for value in tensors["list"]]
    equation = equation.replace(" ", "")
    if None in operands or equation.count("->") != 1:
        return None
    inputs, output = equation.split("->")
    terms = inputs.split(",")
    if len(terms) != 2 or not all(term.isalpha() and len(set(term)) == len(term) for term in terms + [output]):
        return None
    if not output or any(len(term) != _rank(graph, operand) for term, operand in zip(terms, operands)):
        return None
    first, second = terms
    contracted = [letter for letter in first if letter in second and letter not in output]
    summed_alone = [letter for letter in first + second if letter not in output and letter not in contracted]
    if len(contracted) != 1 or summed_alone or any(letter not in first + second for letter in output):
        return None
    columns = output[-1]
    if columns in first and columns in second:
        return None
    # the operand holding the output's last letter supplies the columns; the other one the rows
    left_index = 0 if columns in second else 1
    left_term, right_term = terms[left_index], terms[1 - left_index]
    batch = [letter for letter in output if letter in first and letter in second]
    rows = [letter for letter in output if letter in left_term and letter not in right_term]
    if not rows or list(output) != batch + rows + [columns] or len(right_term) != len(batch) + 2:
        return None
    left_order = tuple(left_term.index(letter) for letter in batch + rows + contracted)
    right_order = tuple(right_term.index(letter) for letter in batch + contracted + [columns])
    return MatmulForm(
        operands[left_index],
        operands[1 - left_index],
        None if left_order == tuple(range(len(left_order))) else left_order,
        None if right_order == tuple(range(len(right_order))) else right_order,
        batch_rank=len(batch),
    )


FORM_READERS = {
    "aten.mm.default": _mm_form,
    "aten.bmm.default": _bmm_form,
    "aten.addmm.default": _addmm_form,
    "aten.linear.default": _linear_form,
    "aten.matmul.default": _matmul_form,
    "aten.einsum.default": _einsum_form,
}


def _permuted(shape: tuple[Dim, ...], order: tuple[int, ...] | None) -> tuple[Dim, ...]:
    return shape if order is None else tuple(shape[dim] for dim in order)


def _broadcasts_into(shape: tuple[Dim, ...], target: tuple[Dim, ...]) -> bool:
    """Whether `shape`, aligned with the trailing dims of `target`, is 1 or equal in each of them."""
    if len(shape) > len(target):
        return False
    aligned = target[len(target) - len(shape):]
    return all(size == 1 or size == full for size, full in zip(shape, aligned))


def _fits(form: MatmulForm, out: TensorSpec, graph: OpGraph) -> bool:
    """Shapes and dtypes as the kernel assumes: one float dtype, matching K, the output's layout, no empty dim."""
    left, right = graph.spec_of(form.left), graph.spec_of(form.right)
    addend = graph.spec_of(form.addend) if form.addend is not None else None
    specs = [spec for spec in (left, right, addend, out) if spec is not None]
    if left is None or right is None or (form.addend is not None and addend is None):
        return False
    if out.dtype not in FUSIBLE_DTYPES or any(spec.dtype != out.dtype for spec in specs):
        return False
    if any(size == 0 for spec in specs for size in spec.shape):
        return False
    left_shape, right_shape = _permuted(left.shape, form.left_order), _permuted(right.shape, form.right_order)
    batch_rank, row_rank = form.batch_rank, out.rank - form.batch_rank - 1
    if row_rank < 1 or len(left_shape) < row_rank + 1 or len(right_shape) < 2:
        return False
    left_batch, right_batch = left_shape[: -row_rank - 1], right_shape[:-2]
    return (
        left_shape[-row_rank - 1 : -1] == out.shape[batch_rank:-1]
        and left_shape[-1] == right_shape[-2]
        and right_shape[-1] == out.shape[-1]
        and _broadcasts_into(left_batch, out.shape[:batch_rank])
        and _broadcasts_into(right_batch, out.shape[:batch_rank])
        and (addend is None or _broadcasts_into(addend.shape, out.shape))
    )


@dataclass(frozen=True)
class ProblemSize:
    """Example sizes of one anchor's product (symbols at their example values), for default parameters."""

    batch: int
    rows: int
    columns: int
    depth: int


def problem_size(node: OpNode, form: MatmulForm, graph: OpGraph) -> ProblemSize:
    def size(dim: Dim) -> int:
        return dim if isinstance(dim, int) else graph.symbol_hints.get(dim, UNKNOWN_SIZE)

    shape = node.spec.shape
    left_shape = _permuted(graph.spec_of(form.left).shape, form.left_order)
    return ProblemSize(
        batch=math.prod(size(dim) for dim in shape[: form.batch_rank]),
        rows=math.prod(size(dim) for dim in shape[form.batch_rank : -1]),
        columns=size(shape[-1]),
        depth=size(left_shape[-1]),
    )


class MatmulTemplate(Template):
    """Blocked matrix products (the Triton tutorial's GEMM) with a pointwise epilogue on each output tile."""

    name = "matmul"
    summary = "mm, bmm, addmm, linear, matmul and matmul-shaped einsum, with pointwise epilogues"
    parameters = (
        tile("tile", ("M", "N", "K"), 16, 256, "output rows x columns per program, and the K slice per step"),
        power_of_two("group", 1, 64, "row tiles launched side by side, so they share right-operand columns in L2"),
        power_of_two("warps", 1, 16, "warps per program"),
        whole_number("stages", 1, 6, "K slices in flight on the GPU (software pipelining depth)"),
        choice(
            "precision",
            ("ieee", "tf32"),
            "float32 operands: ieee multiplies exactly (the default), tf32 on TF32 tensor cores (faster, about "
            "1e-3 relative error); float16/bfloat16 operands always use tensor cores with float32 accumulation",
        ),
    )

    def anchor(self, node: OpNode, graph: OpGraph) -> AnchorShape | None:
        form = matmul_form(node, graph)
        if form is None:
            return None
        # no prologue: operands are read tile by tile through their strides, many times over
        return AnchorShape(None, tuple(graph.spec_of(form.left).shape), tuple(node.spec.shape))

    def default_parameters(self, plan: KernelPlan, graph: OpGraph) -> dict[str, Any]:
        node = next(node for node in graph.nodes if node.name == plan.anchor)
        size = problem_size(node, matmul_form(node, graph), graph)
        large_tiles = size.batch * math.ceil(size.rows / 128) * math.ceil(size.columns / 128)
        half = node.spec.dtype != "float32"
        if large_tiles >= H200_SMS:
            # a full wave of large tiles: every SM busy, fewest reloads of the operands
            tile_sizes, warps, stages = ((128, 128, 64), 8, 4) if half else ((128, 64, 32), 4, 3)
        else:
            # small problems: smaller tiles spread the work over more SMs; few rows get a short tile
            block_m = min(64, max(16, 1 << (size.rows - 1).bit_length()))
            tile_sizes, warps, stages = (block_m, 64, 32), 4, (4 if half else 3)
        return {"tile": tile_sizes, "group": 8, "warps": warps, "stages": stages, "precision": "ieee"}

    def render(self, plan: KernelPlan, context: RenderContext) -> str:
        node = next(node for node in context.graph.nodes if node.name == plan.anchor)
        return MatmulKernel(plan, context, node, matmul_form(node, context.graph)).source()


class MatmulKernel:
    """Renders one matmul plan: the `@triton.jit` kernel, then its launch wrapper."""

    def __init__(self, plan: KernelPlan, context: RenderContext, node: OpNode, form: MatmulForm):
        self.plan, self.context, self.node, self.form = plan, context, node, form
        graph = context.graph
        self.domain = plan.domain
        self.batch_rank = form.batch_rank
        self.row_dims = list(range(form.batch_rank, len(self.domain) - 1))
        self.batch_dims = [dim for dim in range(form.batch_rank) if self.domain[dim] != 1]
        self.dtype = node.spec.dtype
        nodes = {member.name: member for member in graph.nodes}
        epilogue_reads = {ref for member in plan.epilogue for ref in nodes[member].input_refs()}
        # values read in the output domain: the addend and what epilogue ops read from outside
        self.domain_values = [value for value in plan.inputs if value == form.addend or value in epilogue_reads]

    def source(self) -> str:
        return self.kernel_source() + "\n\n" + self.wrapper_source()

    # -- kernel -------------------------------------------------------------------------------

    def kernel_source(self) -> str:
        plan, graph, form = self.plan, self.context.graph, self.form
        scope = self.context.scope()
        for fixed in KERNEL_NAMES:
            scope.fresh(fixed)
        left, right = scope.fresh(form.left), scope.fresh(form.right)
        left_ptr, right_ptr = scope.fresh(f"{left}_ptr"), scope.fresh(f"{right}_ptr")
        self.left_strides = {dim: scope.fresh(f"{left}_stride{dim}") for dim in self.batch_dims + self.varying_rows}
        self.left_stride_k = scope.fresh(f"{left}_stride_k")
        self.right_strides = {dim: scope.fresh(f"{right}_stride{dim}") for dim in self.batch_dims}
        self.right_stride_k, self.right_stride_n = scope.fresh(f"{right}_stride_k"), scope.fresh(f"{right}_stride_n")
        variables: dict[str, str] = {}
        self.reads = DomainReads(graph, self.domain, self.domain_values, scope, variables, flat_fast_path=True)
        batch_lines, batch_index, self.batch_sizes = self._split(self.batch_dims, "batch", scope)
        row_lines, row_index, self.row_sizes = self._split(self.varying_rows, "rows", scope)
        output_pointers = {value: scope.fresh(f"{value}_ptr") for value in plan.outputs}

        body = ["tiles_m = tl.cdiv(M, BLOCK_M)", "tiles_n = tl.cdiv(N, BLOCK_N)"]
        if self.batch_dims:
            body += [
                "tiles_per_batch = tiles_m * tiles_n",
                "# programs walk the batch outermost; the batch index is a 1x1 block so that per-batch",
                "# offsets broadcast against the tiles like row and column indices do",
                "batch = (tl.program_id(0) // tiles_per_batch).to(tl.int64) + tl.zeros((1, 1), dtype=tl.int64)",
                "pid = tl.program_id(0) % tiles_per_batch",
            ]
        else:
            body.append("pid = tl.program_id(0)")
        body += [
            "# GROUP_M row tiles run side by side, so the right-operand columns they share stay in L2",
            "tiles_in_group = GROUP_M * tiles_n",
            "first_tile_m = (pid // tiles_in_group) * GROUP_M",
            "group_rows = tl.minimum(tiles_m - first_tile_m, GROUP_M)",
            "tile_m = first_tile_m + (pid % tiles_in_group) % group_rows",
            "tile_n = (pid % tiles_in_group) // group_rows",
            "# int64: indices times strides may pass 2**31",
            "rows = tile_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)",
            "cols = tile_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)",
            "ks = tl.arange(0, BLOCK_K).to(tl.int64)",
        ]
        if batch_lines:
            body.append("# split the batch index into the index of each batch dim")
            body += batch_lines
        if row_lines:
            body.append(f"# split each row into its index along the {len(self.varying_rows)} dims flattened into M")
            body += row_lines
        left_rows = self._offsets(
            [(f"{batch_index[dim]}", self.left_strides[dim]) for dim in self.batch_dims]
            + [(f"{row_index[dim]}[:, None]", self.left_strides[dim]) for dim in self.varying_rows]
        )
        right_cols = self._offsets(
            [(f"{batch_index[dim]}", self.right_strides[dim]) for dim in self.batch_dims]
            + [("cols[None, :]", self.right_stride_n)]
        )
        left_row_pointers, right_col_pointers = scope.fresh(f"{left}_row_ptrs"), scope.fresh(f"{right}_col_ptrs")
        left_tile, right_tile = scope.fresh(f"{left}_tile"), scope.fresh(f"{right}_tile")
        if not self.varying_rows:
            body.append("# the product has a single row: every row of the tile reads it, and only the first is stored")
            left_rows = self._offsets([(a, b) for a, b in left_rows_terms_zero()]) if False else left_rows
        body += [
            f"{left_row_pointers} = {left_ptr}{left_rows}",
            f"{right_col_pointers} = {right_ptr}{right_cols}",
            "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
            "for k_start in range(0, K, BLOCK_K):",
            f"{INDENT}k = k_start + ks",
            f"{INDENT}# masked lanes read 0: past K they add nothing to the sums; past M and N they are never stored",
            f"{INDENT}{left_tile} = tl.load(",
            f"{INDENT * 2}{left_row_pointers} + k[None, :] * {self.left_stride_k},",
            f"{INDENT * 2}mask=(rows < M)[:, None] & (k < K)[None, :],",
            f"{INDENT * 2}other=0.0,",
            f"{INDENT})",
            f"{INDENT}{right_tile} = tl.load(",
            f"{INDENT * 2}{right_col_pointers} + k[:, None] * {self.right_stride_k},",
            f"{INDENT * 2}mask=(k < K)[:, None] & (cols < N)[None, :],",
            f"{INDENT * 2}other=0.0,",
            f"{INDENT})",
        ]
        body += [INDENT + line for line in self._dot_lines(left_tile, right_tile)]
        body += self._epilogue_lines(variables, row_index, batch_index, scope)
        for value in plan.outputs:
            dtype = graph.spec_of(value).dtype
            body.append(f"tl.store({output_pointers[value]} + out_offsets, {stored(variables[value], dtype)}, mask=mask)")

        parameters = (
            [left_ptr, right_ptr]
            + self.reads.pointer_parameters()
            + list(output_pointers.values())
            + ["M", "N", "K"]
            + list(self.batch_sizes.values())
            + list(self.row_sizes.values())
            + list(self.left_strides.values())
            + [self.left_stride_k]
            + list(self.right_strides.values())
            + [self.right_stride_k, self.right_stride_n]
            + self.reads.stride_parameters()
            + self.reads.flag_parameters()
            + ["BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr", "BLOCK_K: tl.constexpr", "GROUP_M: tl.constexpr"]
            + (["WIDEN_BFLOAT16: tl.constexpr"] if self.dtype == "bfloat16" else [])
        )
        lines = ["@triton.jit", f"def {plan.kernel}("]
        lines += [f"{INDENT}{parameter}," for parameter in parameters]
        lines += ["):"] + [INDENT + line if line else "" for line in self._docstring()]
        lines += [f"{INDENT}{line}" for line in body]
        return "\n".join(lines) + "\n"
