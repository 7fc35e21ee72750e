"""The matmul template: mm, bmm, addmm, linear, matmul and matmul-shaped einsum as one blocked Triton GEMM.

Operands are read through their strides (a transposed weight is never copied); pointwise epilogue ops
(bias, scaling, activations, residual adds, clamps) run on each output tile before it is stored, and a
sum, mean, amax, amin or logsumexp over the output's last dim may fold each tile's whole rows after them.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from typing import Any

from drtriton_lsp.compiler.elementwise import FUSIBLE_DTYPES, bind_arguments, float_literal
from drtriton_lsp.compiler.graph import DTYPE_BYTES, Dim, OpGraph, OpNode, TensorSpec
from drtriton_lsp.compiler.names import NameScope
from drtriton_lsp.compiler.templates.base import (
    AnchorShape,
    KernelPlan,
    RenderContext,
    Template,
    choice,
    example_size,
    graph_ref,
    power_of_two,
    power_of_two_within,
    tile,
    whole_number,
)
from drtriton_lsp.compiler.templates.fold import COMBINE_DESCRIPTIONS, COMBINE_HELPERS, Fold, FoldNames, reduction_of
from drtriton_lsp.compiler.templates.gemm import (
    GEMM_DOCSTRING_WIDTH,
    PRECISION,
    dot_lines,
    products_text,
    tile_epilogue_lines,
)
from drtriton_lsp.compiler.templates.pointwise import (
    INDENT,
    DomainReads,
    domain_text,
    elementwise_lines,
    flat_index_lines,
    stored,
)
from drtriton_lsp.compiler.templates.writer import H200_STREAMING_MULTIPROCESSORS

# names the kernel body spells literally; taken first, so a graph value with one of them is renamed
KERNEL_NAMES = (
    "pid", "tiles_m", "tiles_n", "tiles_per_batch", "tiles_in_group", "first_tile_m", "group_rows",
    "tile_m", "tile_n", "batch", "rows", "cols", "ks", "k", "k_start", "acc", "mask", "out_offsets",
    "M", "N", "K", "BLOCK_M", "BLOCK_N", "BLOCK_K", "GROUP_M", "WIDEN_BFLOAT16", "DESCRIPTORS", "RIGHT_K_CONTIGUOUS",
)  # fmt: skip
# the names a kernel with a fused reduction adds (`reduced_count` is spelled by the shared Fold's mean)
REDUCTION_KERNEL_NAMES = ("row_mask", "reduced_count")
# (combine, finish) of the reductions a kernel folds on its output tile: sum, mean, amax, amin, logsumexp
TILE_REDUCTIONS = {("sum", None), ("sum", "mean"), ("max", None), ("min", None), ("logsumexp", None)}
# the widest tile N: a fused reduction's rows must fit one tile
MAX_TILE_N = 256
# float32 products of at least this many flops stay in cuBLAS by default. Measured on an H200 (bench
# fusion/linear_bias_relu, 137 GFLOP): our exact-float32 kernel ran at 44 % of cuBLAS's rate, so once the
# product takes longer than a few launches, cuBLAS plus a pointwise kernel for the epilogue is faster; below
# this (about 6 us at the 48 TFLOP/s cuBLAS reached on that problem) one fused kernel saves a launch and a
# pass over the output. The threshold is that estimate, not a measured crossover.
FLOAT32_LIBRARY_FLOPS = 2**28
# How a kernel reads its operand tiles. Pointer loads are the default. TMA descriptor loads, measured on an H200
# (benchmarks/matmul_variants.py, bfloat16 linear layers of 34-94 GFLOP, no epilogue), reached 74-89 % of cuBLAS against
# 64-73 % for pointer loads; on whole problems with fused epilogues (benchmarks/matmul_loads_ab.py) they were faster on
# some and slower on others (transformer_encoder: 3.64 against 2.37 ms, not understood), so only a search that measured
# them on the problem, or a script line, chooses them.
LOADS = choice(
    "loads",
    ("pointers", "descriptors"),
    "pointers: masked loads through the operands' strides; descriptors: TMA loads through tensor descriptors the "
    "wrapper builds on each call where the operands' layout allows it (else pointer loads), for products with no batch "
    "dim to walk and at least one output row dim",
)


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


def _rank(graph: OpGraph, value: str | None) -> int:
    spec = graph.spec_of(value) if value is not None else None
    return spec.rank if spec is not None else -1


def _mm_form(bound: dict[str, Any], graph: OpGraph) -> MatmulForm | None:
    left, right = graph_ref(bound["self"]), graph_ref(bound["mat2"])
    if _rank(graph, left) != 2 or _rank(graph, right) != 2:
        return None
    return MatmulForm(left, right, None, None, batch_rank=0)


def _bmm_form(bound: dict[str, Any], graph: OpGraph) -> MatmulForm | None:
    left, right = graph_ref(bound["self"]), graph_ref(bound["mat2"])
    if _rank(graph, left) != 3 or _rank(graph, right) != 3:
        return None
    return MatmulForm(left, right, None, None, batch_rank=1)


def _addmm_form(bound: dict[str, Any], graph: OpGraph) -> MatmulForm | None:
    left, right, addend = graph_ref(bound["mat1"]), graph_ref(bound["mat2"]), graph_ref(bound["self"])
    alpha, beta = bound["alpha"], bound["beta"]
    if _rank(graph, left) != 2 or _rank(graph, right) != 2 or addend is None:
        return None
    if not all(isinstance(scale, (int, float)) and not isinstance(scale, bool) for scale in (alpha, beta)):
        return None
    if not (math.isfinite(alpha) and math.isfinite(beta)):
        return None
    # beta = 0: PyTorch ignores the input entirely (a NaN in it does not propagate)
    addend = addend if beta != 0 else None
    return MatmulForm(left, right, None, None, batch_rank=0, addend=addend, alpha=alpha, beta=beta)


def _linear_form(bound: dict[str, Any], graph: OpGraph) -> MatmulForm | None:
    left, weight, bias = graph_ref(bound["input"]), graph_ref(bound["weight"]), bound["bias"]
    if _rank(graph, left) < 2 or _rank(graph, weight) != 2 or (bias is not None and graph_ref(bias) is None):
        return None
    # out = input @ weight.T (+ bias): the weight is read as [K, N] through swapped strides
    return MatmulForm(left, weight, None, (1, 0), batch_rank=0, addend=graph_ref(bias))


def _matmul_form(bound: dict[str, Any], graph: OpGraph) -> MatmulForm | None:
    left, right = graph_ref(bound["self"]), graph_ref(bound["other"])
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
    operands = [graph_ref(value) for value in tensors["list"]]
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
    """The product's sizes, reading a symbol as its example value (see example_size)."""

    def size(dim: Dim) -> int:
        return example_size(dim, graph)

    shape = node.spec.shape
    left_shape = _permuted(graph.spec_of(form.left).shape, form.left_order)
    return ProblemSize(
        batch=math.prod(size(dim) for dim in shape[: form.batch_rank]),
        rows=math.prod(size(dim) for dim in shape[form.batch_rank : -1]),
        columns=size(shape[-1]),
        depth=size(left_shape[-1]),
    )


class MatmulTemplate(Template):
    """Blocked matrix products (the Triton tutorial's GEMM) with a pointwise epilogue on each output tile.

    Large float32 products are kept in cuBLAS by default (see FLOAT32_LIBRARY_FLOPS); a script line or a
    search that measured this kernel faster chooses it.
    """

    name = "matmul"
    summary = "mm, bmm, addmm, linear, matmul and matmul-shaped einsum, with pointwise epilogues"
    parameters = (
        tile("tile", ("M", "N", "K"), 16, 256, "output rows x columns per program, and the K slice per step"),
        power_of_two("group", 1, 64, "row tiles launched side by side, so they share right-operand columns in L2"),
        power_of_two("warps", 1, 16, "warps per program"),
        whole_number("stages", 1, 6, "K slices in flight on the GPU (software pipelining depth)"),
        PRECISION,
        LOADS,
    )
    reduces_output = True

    def anchor(self, node: OpNode, graph: OpGraph) -> AnchorShape | None:
        form = matmul_form(node, graph)
        if form is None:
            return None
        # no prologue: operands are read tile by tile through their strides, many times over
        return AnchorShape(None, tuple(graph.spec_of(form.left).shape), tuple(node.spec.shape))

    def kept_by_default(self, node: OpNode, graph: OpGraph) -> bool:
        if node.spec.dtype != "float32":
            return False
        size = problem_size(node, matmul_form(node, graph), graph)
        return 2 * size.batch * size.rows * size.columns * size.depth >= FLOAT32_LIBRARY_FLOPS

    def reduction_problem(self, plan: KernelPlan, graph: OpGraph) -> str:
        nodes = {node.name: node for node in graph.nodes}
        node = nodes[plan.reduction]
        reduction = reduction_of(node, graph)
        described = f"{plan.reduction} ({node.op})"
        if reduction is None or reduction.element or (reduction.combine, reduction.finish) not in TILE_REDUCTIONS:
            return f"{described} is not a sum, mean, amax, amin or logsumexp over float values; a matmul kernel folds only those"
        last = graph.spec_of(reduction.source).rank - 1
        if reduction.dims != (last,):
            dims = ", ".join(str(dim) for dim in reduction.dims)
            return (
                f"{described} reduces dim {dims} of {reduction.source}; a matmul kernel folds only the last dim "
                f"(dim {last}, N), whose whole rows one program holds"
            )
        if "tile" not in plan.params:
            return ""
        block_n = plan.params["tile"][1]
        columns = nodes[plan.anchor].spec.shape[-1]
        width = example_size(columns, graph)
        if width <= block_n:
            return ""
        length = str(columns) if isinstance(columns, int) else f"{columns} (example size {width})"
        return (
            f"{described} folds rows of {length} columns, more than the tile's N ({block_n}): rows would span several "
            f"programs; a tile with N >= the row length (at most {MAX_TILE_N}) keeps each row in one program"
        )

    def parameter_problem(self, plan: KernelPlan, graph: OpGraph) -> str:
        if plan.params.get("loads") != "descriptors":
            return ""
        node = next(node for node in graph.nodes if node.name == plan.anchor)
        batch_rank = matmul_form(node, graph).batch_rank
        if any(plan.domain[dim] != 1 for dim in range(batch_rank)):
            return "loads=descriptors: the product has batch dims to walk; descriptors read one [rows, K] matrix"
        if all(plan.domain[dim] == 1 for dim in range(batch_rank, len(plan.domain) - 1)):
            return "loads=descriptors: the product has a single output row; descriptors read a [rows, K] matrix"
        return ""

    def default_parameters(self, plan: KernelPlan, graph: OpGraph) -> dict[str, Any]:
        node = next(node for node in graph.nodes if node.name == plan.anchor)
        size = problem_size(node, matmul_form(node, graph), graph)
        if plan.reduction is not None:
            # whole rows in one tile; fewer rows per tile as rows widen, so the tile stays 8192 elements at most
            tile_n = power_of_two_within(size.columns, 16, MAX_TILE_N)
            tile_sizes = (
                power_of_two_within(size.rows, 16, min(64, 8192 // tile_n)),
                tile_n,
                power_of_two_within(size.depth, 16, 32 if node.spec.dtype == "float32" else 128),
            )
            return {"tile": tile_sizes, "group": 8, "warps": 4, "stages": 3, "precision": "ieee", "loads": "pointers"}
        full_wave = size.batch * math.ceil(size.rows / 128) * math.ceil(size.columns / 128) >= H200_STREAMING_MULTIPROCESSORS
        half = node.spec.dtype != "float32"
        if full_wave and half:
            # measured on an H200 (fp16, 4096^3): 128x256x64 with 8 warps ~20 % faster than 128x128x64;
            # a short K leaves nothing to pipeline: 128x128, 4 warps (smaller still below, unless narrow)
            tile_sizes, warps, stages = ((128, 256, 64), 8, 3) if size.depth >= 256 else ((128, 128, 64), 4, 3)
        elif full_wave:
            tile_sizes, warps, stages = (128, 64, 32), 4, 3
        else:
            # less than a wave of large tiles: tiles no larger than the problem spread it over more SMs;
            # half precision streams the (weight) operand in deeper K slices
            tile_sizes = (
                power_of_two_within(size.rows, 16, 64),
                power_of_two_within(size.columns, 16, 64),
                power_of_two_within(size.depth, 16, 128 if half else 32),
            )
            warps, stages = 4, 3
        if full_wave and (size.rows < tile_sizes[0] or size.columns < tile_sizes[1]):
            # a wave of narrow products (a decode step's one query row per head, a 128-wide head): rows or columns
            # past the product's own are masked work and registers, so the tile shrinks to them (16: tl.dot's
            # least), with 4 warps
            tile_sizes = (
                power_of_two_within(size.rows, 16, tile_sizes[0]),
                power_of_two_within(size.columns, 16, tile_sizes[1]),
                tile_sizes[2],
            )
            warps = 4
        elif full_wave and half and size.depth < 256:
            # a short K is bound by the epilogue and the stores: 64x128x32 tiles (twice the programs of 128x128, half
            # the registers each) ran bf16 linears of K = 64, 96 and 192 with a GELU or a scale 1.1-1.3x faster than
            # 128x128x64 on an H200 (benchmarks/results/schedule-ab-h200-2026-12-05.md)
            tile_sizes = (64, 128, 32)
        return {
            "tile": tile_sizes, "group": 8, "warps": warps, "stages": stages, "precision": "ieee", "loads": "pointers"
        }

    def render(self, plan: KernelPlan, context: RenderContext) -> str:
        node = next(node for node in context.graph.nodes if node.name == plan.anchor)
        return MatmulKernel(plan, context, node, matmul_form(node, context.graph)).source()


class MatmulKernel:
    """Renders one matmul plan: the `@triton.jit` kernel, then its launch wrapper.

    Output dims: [batch..., rows..., n]. The kernel takes every size and stride from the wrapper, which
    reads them from the tensors at run time, so symbolic dims need nothing special. The kernel's names
    are all taken here, in one scope, so the kernel body and the wrapper's launch agree on them.
    """

    def __init__(self, plan: KernelPlan, context: RenderContext, node: OpNode, form: MatmulForm):
        self.plan, self.context, self.node, self.form = plan, context, node, form
        self.graph = context.graph
        self.domain = plan.domain
        self.dtype = node.spec.dtype
        self.row_rank = len(self.domain) - form.batch_rank - 1
        # dims of size 1 have index 0 everywhere: no stride, no index arithmetic
        self.batch_dims = [dim for dim in range(form.batch_rank) if self.domain[dim] != 1]
        self.row_dims = [dim for dim in range(form.batch_rank, len(self.domain) - 1) if self.domain[dim] != 1]
        nodes = {member.name: member for member in self.graph.nodes}
        epilogue_reads = {ref for member in plan.epilogue for ref in nodes[member].input_refs()}
        # values read in the output domain: the addend, and what epilogue ops read from outside
        domain_values = [value for value in plan.inputs if value == form.addend or value in epilogue_reads]
        # a fused reduction: its result, and the values the ops after it read, have the reduced shape
        self.reduction = reduction_of(nodes[plan.reduction], self.graph) if plan.reduction else None
        self.reduced_values = {plan.reduction, *plan.reduced_epilogue} if plan.reduction else set()
        reduced_reads = {ref for member in plan.reduced_epilogue for ref in nodes[member].input_refs()}
        reduced_domain_values = [value for value in plan.inputs if value in reduced_reads]
        self.helper_sources: list[str] = []
        self.helper_names: dict[str, str] = {}

        scope = self.scope = context.scope()
        for fixed in KERNEL_NAMES + (REDUCTION_KERNEL_NAMES if self.reduction else ()):
            scope.fresh(fixed)
        self.left, self.right = scope.fresh(form.left), scope.fresh(form.right)
        self.left_pointer, self.right_pointer = scope.fresh(f"{self.left}_ptr"), scope.fresh(f"{self.right}_ptr")
        self.left_strides = {dim: scope.fresh(f"{self.left}_stride{dim}") for dim in self.batch_dims + self.row_dims}
        self.left_stride_k = scope.fresh(f"{self.left}_stride_k")
        self.right_strides = {dim: scope.fresh(f"{self.right}_stride{dim}") for dim in self.batch_dims}
        self.right_stride_k = scope.fresh(f"{self.right}_stride_k")
        self.right_stride_n = scope.fresh(f"{self.right}_stride_n")
        self.descriptors = plan.params["loads"] == "descriptors"
        self.left_descriptor = scope.fresh(f"{self.left}_desc") if self.descriptors else ""
        self.right_descriptor = scope.fresh(f"{self.right}_desc") if self.descriptors else ""
        self.variables: dict[str, str] = {}
        self.reads = DomainReads(self.graph, self.domain, domain_values, scope, self.variables, flat_fast_path=True)
        # they join `variables` once the tile's epilogue is written (a value read in both shapes has two names)
        self.reduced_variables: dict[str, str] = {}
        self.reduced_domain = nodes[plan.reduction].spec.shape if plan.reduction else ()
        self.reduced_reads = DomainReads(
            self.graph, self.reduced_domain, reduced_domain_values, scope, self.reduced_variables, flat_fast_path=False
        )
        self.batch_lines, self.batch_index, self.batch_sizes = self._split(self.batch_dims, "batch")
        self.row_lines, self.row_index, self.row_sizes = self._split(self.row_dims, "rows")
        self.output_pointers = {value: scope.fresh(f"{value}_ptr") for value in plan.outputs}

    def source(self) -> str:
        kernel = self._kernel()
        # the combine functions a fused reduction calls are module-level, defined before the kernel
        return "\n\n".join(self.helper_sources + [kernel, self._wrapper()])

    def _split(self, dims: list[int], flat: str) -> tuple[list[str], dict[int, str], dict[int, str]]:
        """Statements splitting a flat index over `dims` (row-major) into one index per dim; sizes it divides by."""
        if len(dims) <= 1:
            return [], {dim: flat for dim in dims}, {}
        # the other dims are left out of the split by giving them size 1
        domain = tuple(self.domain[dim] if dim in dims else 1 for dim in range(dims[-1] + 1))
        return flat_index_lines(domain, dims, flat, self.scope)

    # -- kernel ----------------------------------------------------------------------------------

    def _kernel(self) -> str:
        plan = self.plan
        body = self._tile_lines()
        if self.batch_lines:
            body += ["# the batch index of each batch dim"] + self.batch_lines
        if self.row_lines:
            body += [f"# each row's index along the {len(self.row_dims)} output dims flattened into M"] + self.row_lines
        body += self._loop_lines()
        index_of_dim = {dim: self.batch_index[dim] for dim in self.batch_dims}
        index_of_dim |= {dim: f"{self.row_index[dim]}[:, None]" for dim in self.row_dims}
        index_of_dim[len(self.domain) - 1] = "cols[None, :]"
        flat_rows = "(batch * M + rows[:, None])" if self.batch_dims else "rows[:, None]"
        body += [
            "mask = (rows < M)[:, None] & (cols < N)[None, :]",
            "# the output is a new contiguous tensor: row-major offsets",
            f"out_offsets = {flat_rows} * N + cols[None, :]",
        ]
        body += self.reads.load_lines(index_of_dim, "mask", flat_offsets="out_offsets")
        body += self._epilogue_lines()
        if self.reduction:
            body += self._reduction_lines({dim: index for dim, index in index_of_dim.items() if dim < len(self.domain) - 1})
        for value in plan.outputs:
            stored_value = stored(self.variables[value], self.graph.spec_of(value).dtype)
            if value in self.reduced_values:
                # the reduced outputs are new contiguous tensors too: a row's value lies at its flat row number
                body.append(f"tl.store({self.output_pointers[value]} + {flat_rows}, {stored_value}, mask=row_mask)")
            else:
                body.append(f"tl.store({self.output_pointers[value]} + out_offsets, {stored_value}, mask=mask)")

        parameters = (
            [self.left_pointer, self.right_pointer]
            + ([self.left_descriptor, self.right_descriptor] if self.descriptors else [])
            + self.reads.pointer_parameters()
            + self.reduced_reads.pointer_parameters()
            + list(self.output_pointers.values())
            + ["M", "N", "K"]
            + self.float_parameters
            + list(self.batch_sizes.values())
            + list(self.row_sizes.values())
            + list(self.left_strides.values())
            + [self.left_stride_k]
            + list(self.right_strides.values())
            + [self.right_stride_k, self.right_stride_n]
            + self.reads.stride_parameters()
            + self.reduced_reads.stride_parameters()
            + self.reads.flag_parameters()
            + ["BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr", "BLOCK_K: tl.constexpr", "GROUP_M: tl.constexpr"]
            + (["WIDEN_BFLOAT16: tl.constexpr"] if self.dtype == "bfloat16" else [])
            + (["DESCRIPTORS: tl.constexpr", "RIGHT_K_CONTIGUOUS: tl.constexpr"] if self.descriptors else [])
        )
        lines = ["@triton.jit", f"def {plan.kernel}("]
        lines += [f"{INDENT}{parameter}," for parameter in parameters]
        lines += ["):"] + [f"{INDENT}{line}" if line else "" for line in self._docstring()]
        lines += [f"{INDENT}{line}" for line in body]
        return "\n".join(lines) + "\n"

    def _docstring(self) -> list[str]:
        replaced = ", ".join(f"{op} ({node})" for node, op in zip(self.plan.nodes, self.plan.ops))
        products = products_text(self.dtype, self.plan.params["precision"])
        if self.row_rank == 1:
            rows = "M = the output dim before the last"
        else:
            rows = f"M = the {self.row_rank} output dims before the last, flattened"
        batch = ""
        if self.batch_dims:
            batch = f" The grid walks the {self.form.batch_rank} leading (batch) dims, one product each."
        finishes = self.plan.epilogue or self.form.addend is not None or self.form.alpha != 1
        tail = "computes the epilogue on the tile in float32 and stores it" if finishes else "stores the tile"
        if self.reduction:
            kept = " (and stores the tile where another op reads it)" if set(self.plan.outputs) - self.reduced_values else ""
            tail = (
                f"{'computes the epilogue on the tile in float32 and ' if finishes else ''}folds each of its rows, whole "
                f"in this program (N <= BLOCK_N), into {COMBINE_DESCRIPTIONS[self.reduction.combine]}{kept}"
            )
        description = (
            f"Output {domain_text(self.domain)} = [M, K] x [K, N], {rows}.{batch} Each program computes one "
            f"BLOCK_M x BLOCK_N output tile: it walks K in BLOCK_K slices with tl.dot ({products}, float32 "
            f"accumulation), then {tail}."
        )
        if self.descriptors:
            description += (
                " With DESCRIPTORS the operand tiles are TMA loads (the wrapper builds the descriptors where the "
                "operands' layout allows them), else pointer loads."
            )
        return [f'"""Replaces {replaced}.', ""] + textwrap.wrap(description, GEMM_DOCSTRING_WIDTH) + ['"""']

    def _tile_lines(self) -> list[str]:
        lines = ["tiles_m = tl.cdiv(M, BLOCK_M)", "tiles_n = tl.cdiv(N, BLOCK_N)"]
        if self.batch_dims:
            lines += [
                "tiles_per_batch = tiles_m * tiles_n",
                "# programs walk the batch outermost; its index is a 1x1 block so per-batch offsets",
                "# broadcast against the tile like the row and column indices",
                "batch = (tl.program_id(0) // tiles_per_batch).to(tl.int64) + tl.zeros((1, 1), dtype=tl.int64)",
                "pid = tl.program_id(0) % tiles_per_batch",
            ]
        else:
            lines.append("pid = tl.program_id(0)")
        return lines + [
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

    def _loop_lines(self) -> list[str]:
        """Pointers to the tile's rows of the left operand and columns of the right one, and the K loop."""
        scope = self.scope
        row_pointers, column_pointers = scope.fresh(f"{self.left}_row_ptrs"), scope.fresh(f"{self.right}_col_ptrs")
        left_tile, right_tile = scope.fresh(f"{self.left}_tile"), scope.fresh(f"{self.right}_tile")
        left_rows = [(self.batch_index[dim], self.left_strides[dim]) for dim in self.batch_dims]
        left_rows += [(f"{self.row_index[dim]}[:, None]", self.left_strides[dim]) for dim in self.row_dims]
        right_columns = [(self.batch_index[dim], self.right_strides[dim]) for dim in self.batch_dims]
        right_columns += [("cols[None, :]", self.right_stride_n)]
        lines: list[str] = []
        if not self.row_dims:
            lines.append("# a single output row: every row of the tile reads it (only the first is stored)")
            left_rows = left_rows + [("tl.zeros((BLOCK_M, 1), dtype=tl.int64)", "")]
        lines += [
            f"{row_pointers} = {self.left_pointer}{_offset_sum(left_rows)}",
            f"{column_pointers} = {self.right_pointer}{_offset_sum(right_columns)}",
            "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
            "for k_start in range(0, K, BLOCK_K):",
        ]
        pointer_loads = [
            "k = k_start + ks",
            "# masked lanes read 0: past K they add nothing to the sums, past M and N nothing is stored",
            f"{left_tile} = tl.load(",
            f"{INDENT}{row_pointers} + k[None, :] * {self.left_stride_k},",
            f"{INDENT}mask=(rows < M)[:, None] & (k < K)[None, :],",
            f"{INDENT}other=0.0,",
            ")",
            f"{right_tile} = tl.load(",
            f"{INDENT}{column_pointers} + k[:, None] * {self.right_stride_k},",
            f"{INDENT}mask=(k < K)[:, None] & (cols < N)[None, :],",
            f"{INDENT}other=0.0,",
            ")",
        ]
        if self.descriptors:
            body = [
                "if DESCRIPTORS:",
                f"{INDENT}# TMA loads of [M, K] and [K, N] (or [N, K]) tiles; past M, N and K they read 0",
                f"{INDENT}{left_tile} = {self.left_descriptor}.load([tile_m * BLOCK_M, k_start])",
                f"{INDENT}if RIGHT_K_CONTIGUOUS:",
                f"{INDENT * 2}{right_tile} = {self.right_descriptor}.load([tile_n * BLOCK_N, k_start]).T",
                f"{INDENT}else:",
                f"{INDENT * 2}{right_tile} = {self.right_descriptor}.load([k_start, tile_n * BLOCK_N])",
                "else:",
            ] + [INDENT + line for line in pointer_loads]
        else:
            body = pointer_loads
        body += dot_lines(left_tile, right_tile, self.dtype, self.plan.params["precision"])
        return lines + [INDENT + line for line in body]

    @property
    def float_parameters(self) -> list[str]:
        """Float scalars a fused reduction's finish reads (a mean's row length)."""
        return self.fold.float_parameters(single=True) if self.reduction else []

    def _reduction_lines(self, index_of_dim: dict[int, str]) -> list[str]:
        """The fused reduction folded over each row of the tile (the shared reduce Fold, whole rows in one
        tile), then the ops after it on the [BLOCK_M, 1] column of results."""
        plan, scope, dtype = self.plan, self.scope, self.dtype
        source = self.variables[self.reduction.source]
        lines = [f"# {plan.reduction}: every row of the tile is whole here (N <= BLOCK_N), so it folds in registers"]
        if dtype != "float32":
            rounded = scope.fresh(f"{source}_rounded")
            lines += [
                f"# the reduction reads the {dtype} tensor PyTorch would store",
                f"{rounded} = {stored(source, dtype)}.to(tl.float32)",
            ]
            source = rounded
        self.fold = Fold(self.reduction, source, FoldNames(scope, plan.reduction), self._helper)
        fold_lines, folded = self.fold.single_fold()
        result = scope.fresh(plan.reduction)
        lines += self.fold.candidate_lines() + fold_lines + self.fold.finish([result], folded)
        lines += [
            "# a [BLOCK_M, 1] column, indexed and masked like the tile's rows",
            f"{result} = {result}[:, None]",
            "row_mask = (rows < M)[:, None]",
        ]
        self.variables[plan.reduction] = result
        result_dtype = self.graph.spec_of(plan.reduction).dtype
        if plan.reduced_epilogue and result_dtype != "float32":
            lines += [
                f"# the ops after it read the {result_dtype} tensor PyTorch would store",
                f"{result} = {stored(result, result_dtype)}.to(tl.float32)",
            ]
        self.variables.update(self.reduced_variables)
        lines += self.reduced_reads.load_lines(index_of_dim, "row_mask")
        return lines + elementwise_lines(self.graph, plan.reduced_epilogue, self.variables, scope, self.context.helpers)

    def _helper(self, kind: str) -> str:
        """The name of a module-level combine function (the reduce template's) the kernel calls."""
        if kind not in self.helper_names:
            self.helper_names[kind] = self.scope.fresh(f"{self.plan.wrapper}_{kind}")
            self.helper_sources.append(COMBINE_HELPERS[kind].format(name=self.helper_names[kind]))
        return self.helper_names[kind]

    def _epilogue_lines(self) -> list[str]:
        """The anchor's value (scaled, plus the addend) and the epilogue ops, in float32."""
        form, variables = self.form, self.variables
        expression = "acc" if form.alpha == 1 else f"acc * {float_literal(form.alpha)}"
        if form.addend is not None:
            addend = variables[form.addend]
            expression += f" + {addend}" if form.beta == 1 else f" + {addend} * {float_literal(form.beta)}"
        return tile_epilogue_lines(self.plan, expression, self.dtype, variables, self.scope, self.context)

    # -- wrapper ---------------------------------------------------------------------------------

    def _wrapper(self) -> str:
        plan, form, graph = self.plan, self.form, self.graph
        scope = self.context.scope()
        tensors = {value: scope.fresh(value) for value in plan.inputs}
        outputs = {value: scope.fresh(value) for value in plan.outputs}
        returned = ", ".join(outputs.values())
        lines = [
            f"def {plan.wrapper}({', '.join(tensors.values())}):",
            f'{INDENT}"""Computes {", ".join(plan.nodes)} in one launch of {plan.kernel}; returns {returned}."""',
        ]
        if form.addend is None and self.node.op == "aten.addmm.default":
            lines.append(f"{INDENT}# beta = 0: PyTorch ignores addmm's input, so the kernel never reads it")
        lines.append(f"{INDENT}# the kernel reads [batch..., rows..., K] and [batch..., K, N] views through strides")
        left = self._permuted(lines, scope, tensors[form.left], form.left_order)
        right = self._permuted(lines, scope, tensors[form.right], form.right_order)
        out_shape = scope.fresh("out_shape")
        if form.batch_rank:
            batch_shape = scope.fresh("batch_shape")
            left_batch, left_matrix = f"{left}.shape[:-{self.row_rank + 1}]", f"{left}.shape[-{self.row_rank + 1}:]"
            batched_left, batched_right = scope.fresh(f"{left}_batched"), scope.fresh(f"{right}_batched")
            lines += [
                f"{INDENT}{batch_shape} = torch.broadcast_shapes({left_batch}, {right}.shape[:-2])",
                f"{INDENT}# an operand without a batch dim, or of size 1 there, is read with stride 0 along it",
                f"{INDENT}{batched_left} = {left}.expand(*{batch_shape}, *{left_matrix})",
                f"{INDENT}{batched_right} = {right}.expand(*{batch_shape}, *{right}.shape[-2:])",
                f"{INDENT}{out_shape} = {batch_shape} + {left}.shape[-{self.row_rank + 1}:-1] + {right}.shape[-1:]",
            ]
            left, right = batched_left, batched_right
        else:
            lines.append(f"{INDENT}{out_shape} = {left}.shape[:-1] + {right}.shape[-1:]")
        reduced_shape = scope.fresh("reduced_shape") if self.reduction else ""
        if self.reduction:
            kept_dim = " + (1,)" if self.reduction.keepdim else ""
            lines.append(f"{INDENT}{reduced_shape} = {out_shape}[:-1]{kept_dim}")
        for value, variable in outputs.items():
            dtype = graph.spec_of(value).dtype
            shape = reduced_shape if value in self.reduced_values else out_shape
            lines.append(f"{INDENT}{variable} = torch.empty({shape}, dtype=torch.{dtype}, device={left}.device)")
        left_strides, right_strides = scope.fresh(f"{left}_strides"), scope.fresh(f"{right}_strides")
        lines += [f"{INDENT}{left_strides} = {left}.stride()", f"{INDENT}{right_strides} = {right}.stride()"]
        stride_lines, read_strides, read_flags = self.reads.wrapper_arguments(tensors, scope)
        reduced_stride_lines, reduced_strides, _ = self.reduced_reads.wrapper_arguments(tensors, scope)
        lines += [INDENT + line for line in stride_lines + reduced_stride_lines]

        block_m, block_n, block_k = plan.params["tile"]
        rows, columns, depth, grid = (scope.fresh(name) for name in ("rows", "columns", "depth", "grid"))
        lines += [
            f"{INDENT}{rows} = {out_shape}[{form.batch_rank}:-1].numel()",
            f"{INDENT}{columns} = {out_shape}[-1]",
            f"{INDENT}{depth} = {left}.shape[-1]",
        ]
        if self.reduction and not isinstance(self.domain[-1], int):
            widened = scope.fresh("BLOCK_N")
            lines += [
                f"{INDENT}# the fused reduction needs each row whole in one program: a free N longer than the",
                f"{INDENT}# tile's N (measured at a size that fits it) widens the tile to N's next power of two",
                f"{INDENT}{widened} = max({block_n}, triton.next_power_of_2({columns}))",
            ]
            block_n = widened
        descriptor_arguments, descriptor_flags = [], []
        if self.descriptors:
            # the descriptors' tiles are the kernel's, a widened N included
            descriptor_lines, descriptor_arguments, descriptor_flags = self._descriptor_lines(
                scope, (left, right), (left_strides, right_strides), (rows, columns, depth), (block_m, block_n, block_k)
            )
            lines += descriptor_lines
        tiles = f"triton.cdiv({rows}, {block_m}) * triton.cdiv({columns}, {block_n})"
        if self.batch_dims:
            lines += [
                f"{INDENT}# one program per {block_m} x {block_n} output tile of each product in the batch",
                f"{INDENT}{grid} = ({out_shape}[:{form.batch_rank}].numel() * {tiles},)",
            ]
        else:
            lines += [f"{INDENT}# one program per {block_m} x {block_n} output tile", f"{INDENT}{grid} = ({tiles},)"]
        arguments = (
            [left, right]
            + descriptor_arguments
            + [tensors[read.value] for read in self.reads.reads + self.reduced_reads.reads]
            + list(outputs.values())
            + [rows, columns, depth]
            + [self.fold.float_argument(name, columns) for name in self.float_parameters]
            + [f"{out_shape}[{dim}]" for dim in list(self.batch_sizes) + list(self.row_sizes)]
            + [f"{left_strides}[{dim}]" for dim in self.left_strides]
            + [f"{left_strides}[-1]"]
            + [f"{right_strides}[{dim}]" for dim in self.right_strides]
            + [f"{right_strides}[-2]", f"{right_strides}[-1]"]
            + read_strides
            + reduced_strides
            + read_flags
            + [f"BLOCK_M={block_m}", f"BLOCK_N={block_n}", f"BLOCK_K={block_k}", f"GROUP_M={plan.params['group']}"]
            + ([f"WIDEN_BFLOAT16={left}.device.type == 'cpu'"] if self.dtype == "bfloat16" else [])
            + descriptor_flags
            + [f"num_warps={plan.params['warps']}", f"num_stages={plan.params['stages']}"]
        )
        lines.append(f"{INDENT}{plan.kernel}[{grid}](")
        lines += [f"{INDENT * 2}{argument}," for argument in arguments]
        lines += [f"{INDENT})", f"{INDENT}return {returned}"]
        return "\n".join(lines) + "\n"

    def _descriptor_lines(
        self,
        scope: NameScope,
        operands: tuple[str, str],
        strides: tuple[str, str],
        sizes: tuple[str, str, str],
        tile_sizes: tuple[Any, Any, Any],
    ) -> tuple[list[str], list[str], list[str]]:
        """Wrapper statements that decide, from the operands' strides and addresses at run time, whether the kernel
        reads its tiles through TMA descriptors, and build them (None each otherwise: pointer loads); the
        descriptors' names, and the kernel's DESCRIPTORS and RIGHT_K_CONTIGUOUS arguments.

        A descriptor reads a matrix whose last dim is contiguous, whose row stride is a multiple of 16 bytes and at
        least the row length, from a 16-byte aligned address: the left operand as [rows, K] (its row dims flatten
        into one stride, so each must step over the next whole), the right one as [K, N], or as [N, K] when K is
        its contiguous dim (a linear layer's weight). Any other layout is read through pointers.
        """
        (left, right), (left_strides, right_strides), (rows, columns, depth) = operands, strides, sizes
        left_descriptor, right_descriptor = scope.fresh(f"{left}_desc"), scope.fresh(f"{right}_desc")
        block_m, block_n, block_k = tile_sizes  # numbers, or a wrapper variable for a tile's N widened at run time
        align = 16 // DTYPE_BYTES[self.dtype]  # row strides in elements that are whole multiples of 16 bytes
        flag, k_contiguous = scope.fresh("descriptors"), scope.fresh("right_k_contiguous")
        right_row_stride = scope.fresh(f"{right}_row_stride")
        descriptor_class = scope.fresh("TensorDescriptor")
        left_row_stride = f"{left_strides}[{self.row_dims[-1]}]"
        # the row dims flatten into one stride where each one's stride steps over the next one whole
        flattened = [
            f"{left_strides}[{outer}] == {left_strides}[{inner}] * {left}.shape[{inner}]"
            for outer, inner in zip(self.row_dims, self.row_dims[1:])
        ]
        # a TMA box spans at most 256 elements per dim: a tile's N widened past that reads through pointers
        widened = [] if isinstance(block_n, int) else [f"{block_n} <= {MAX_TILE_N}"]
        conditions = widened + [
            f"{left_strides}[-1] == 1",
            f"{left_row_stride} % {align} == 0",
            f"{left_row_stride} >= {depth}",
            *flattened,
            f"{left}.data_ptr() % 16 == 0",
            f"{right_strides}[-2 if {k_contiguous} else -1] == 1",
            f"{right_row_stride} % {align} == 0",
            f"{right_row_stride} >= ({depth} if {k_contiguous} else {columns})",
            f"{right}.data_ptr() % 16 == 0",
        ]
        joined = [f"{INDENT}{condition} and" for condition in conditions[:-1]] + [f"{INDENT}{conditions[-1]}"]
        imported = "from triton.tools.tensor_descriptor import TensorDescriptor"
        if descriptor_class != "TensorDescriptor":
            imported += f" as {descriptor_class}"
        lines = [
            "# TMA descriptors read the operand tiles where their layout allows it (see the kernel), else pointers",
            f"{k_contiguous} = {right_strides}[-1] != 1",
            f"{right_row_stride} = {right_strides}[-1] if {k_contiguous} else {right_strides}[-2]",
            f"{flag} = (",
            *joined,
            ")",
            f"if {flag}:",
            f"{INDENT}{imported}",
            f"{INDENT}{left_descriptor} = {descriptor_class}(",
            f"{INDENT * 2}{left}, [{rows}, {depth}], [{left_row_stride}, 1], [{block_m}, {block_k}]",
            f"{INDENT})",
            f"{INDENT}if {k_contiguous}:",
            f"{INDENT * 2}{right_descriptor} = {descriptor_class}(",
            f"{INDENT * 3}{right}, [{columns}, {depth}], [{right_row_stride}, 1], [{block_n}, {block_k}]",
            f"{INDENT * 2})",
            f"{INDENT}else:",
            f"{INDENT * 2}{right_descriptor} = {descriptor_class}(",
            f"{INDENT * 3}{right}, [{depth}, {columns}], [{right_row_stride}, 1], [{block_k}, {block_n}]",
            f"{INDENT * 2})",
            "else:",
            f"{INDENT}{left_descriptor} = {right_descriptor} = None",
        ]
        flags = [f"DESCRIPTORS={flag}", f"RIGHT_K_CONTIGUOUS={flag} and {k_contiguous}"]
        return [f"{INDENT}{line}" for line in lines], [left_descriptor, right_descriptor], flags

    def _permuted(self, lines: list[str], scope: NameScope, tensor: str, order: tuple[int, ...] | None) -> str:
        """The wrapper variable holding `tensor` permuted by `order` (a view); `tensor` itself for None."""
        if order is None:
            return tensor
        if order == (1, 0):
            view = scope.fresh(f"{tensor}_t")
            lines.append(f"{INDENT}{view} = {tensor}.t()")
        else:
            view = scope.fresh(f"{tensor}_permuted")
            lines.append(f"{INDENT}{view} = {tensor}.permute({', '.join(str(dim) for dim in order)})")
        return view


def _offset_sum(terms: list[tuple[str, str]]) -> str:
    """" + index * stride + ..." for (index, stride) pairs; an empty stride adds the index alone."""
    return "".join(f" + {index} * {stride}" if stride else f" + {index}" for index, stride in terms)
