"""The reduce and scan templates: sum, mean, max/min, argmax/argmin, prod, logsumexp, var/std and vector
norms over any dims, and cumsum/cumprod along one dim, each with a fused pointwise prologue and epilogue.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from drtriton_lsp.compiler.elementwise import TRITON_DTYPES
from drtriton_lsp.compiler.errors import ScheduleError
from drtriton_lsp.compiler.gather import GATHER_OPS, read_members, reads_of
from drtriton_lsp.compiler.graph import Dim, OpGraph, OpNode
from drtriton_lsp.compiler.names import NameScope
from drtriton_lsp.compiler.reshape_reads import RESHAPE_OPS
from drtriton_lsp.compiler.templates.base import (
    AnchorShape,
    KernelPlan,
    RenderContext,
    Template,
    choice,
    example_extent,
    next_power_of_two,
    power_of_two,
)
from drtriton_lsp.compiler.templates.pointwise import (
    INDENT,
    DomainReads,
    domain_text,
    elementwise_lines,
    stored,
)
from drtriton_lsp.compiler.templates.fold import (
    COMBINE_DESCRIPTIONS,
    HELPER_OF_COMBINE,
    LOOP_STATES,
    NEGATIVE_INFINITY,
    POSITIVE_INFINITY,
    Fold,
    FoldNames,
    dims_argument,
    floating_source,
    reduction_of,
    result_dtype,
)
from drtriton_lsp.compiler.templates.writer import (
    H200_STREAMING_MULTIPROCESSORS,
    KernelWriter,
    launch_lines,
    part_index_lines,
    product_text,
    tuple_text,
)

# elements one program holds in registers at a time, by default (rows x block)
TILE_ELEMENTS = 4096
# the reduced extent up to which the default takes a whole row in one block
SINGLE_BLOCK_LIMIT = 4096
# a program's rows and block when the folded dims are not the innermost (measured on the H200)
STRIDED_ROWS = 32
STRIDED_BLOCK = 64
# at most this many programs share one row (their partial results fit one tile of the second kernel)
MAX_SPLITS = 256

STRATEGY_DOC = (
    "single: the whole reduced extent in one block (its next power of two, sized at run time); "
    "loop: chunks of `block` elements with running accumulators; "
    "split: `splits` programs per row fold every splits-th chunk, a second kernel folds their results"
)
SCAN_STRATEGY_DOC = (
    "single: a whole line in one block (its next power of two, sized at run time); "
    "loop: chunks of `block` elements, carrying the running total from chunk to chunk"
)


@dataclass(frozen=True)
class Scan:
    """A cumulative op along one dim: combine is "sum" (cumsum) or "product" (cumprod)."""

    source: str
    dim: int
    combine: str


SCAN_COMBINES = {"aten.cumsum.default": "sum", "aten.cumprod.default": "product"}


def scan_of(node: OpNode, graph: OpGraph) -> Scan | None:
    """The scan `node` computes, if this template computes it exactly as PyTorch does; else None."""
    combine = SCAN_COMBINES.get(node.op)
    found = floating_source(node, graph) if combine is not None else None
    if found is None:
        return None
    bound, source, spec = found
    dims = dims_argument(bound["dim"], spec.rank)
    if dims is None or len(dims) != 1 or len(node.outputs) != 1:
        return None
    output = node.outputs[0]
    if output.dtype != result_dtype(bound, spec.dtype) or output.shape != spec.shape:
        return None
    return Scan(source, dims[0], combine)


def _tiling(graph: OpGraph, domain: tuple[Dim, ...], dims: tuple[int, ...], *, may_split: bool) -> dict[str, Any]:
    """Default strategy, block, rows, warps (and splits) for folding `dims` of `domain` (rows: the other dims).

    When the innermost dim is folded, a row is contiguous, so a program takes a wide block of it,
    and fewer rows per program where rows are too few to fill the GPU. Otherwise adjacent rows are
    adjacent in memory, so a program keeps 32 rows (a 128-byte line of float32 per load) with a
    narrow block. Still too few programs: several share each row (split), where the template can.
    """
    folded = example_extent([domain[dim] for dim in dims], graph)
    row_total = example_extent([size for dim, size in enumerate(domain) if dim not in dims], graph)
    varying = [dim for dim, size in enumerate(domain) if size != 1]
    width = next_power_of_two(folded)
    target = 2 * H200_STREAMING_MULTIPROCESSORS
    if not varying or varying[-1] in dims:
        block = max(16, min(width, SINGLE_BLOCK_LIMIT))
        rows = max(1, TILE_ELEMENTS // block)
        while rows > 1 and -(-row_total // rows) < target:
            rows //= 2
    else:
        block = max(16, min(width, STRIDED_BLOCK))
        rows = STRIDED_ROWS
        # a scan cannot split its lines, so it gives up coalescing for programs
        while not may_split and rows > 1 and -(-row_total // rows) < H200_STREAMING_MULTIPROCESSORS:
            rows //= 2
    programs = -(-row_total // rows)
    chunks = -(-folded // block)
    splits = 1
    while may_split and splits * 2 <= min(MAX_SPLITS, chunks) and programs * splits < target:
        splits *= 2
    strategy = "single" if width <= block else "split" if splits > 1 else "loop"
    parameters = {"strategy": strategy, "block": block, "rows": rows, "warps": min(8, max(1, rows * block // 256))}
    return parameters | ({"splits": splits} if may_split else {})


class AnchoredKernelWriter(KernelWriter):
    """What the reduce and scan kernels add: their anchor, and the split of reads into the prologue's
    (input domain) and the epilogue's (output domain)."""

    def __init__(self, plan: KernelPlan, context: RenderContext):
        super().__init__(plan, context)
        self.anchor = self.nodes[plan.anchor]
        # values read by the prologue and the anchor (input domain), and by the epilogue (output domain); a read
        # member's value (an embedding lookup, a reshape) is read, not computed
        self.lookups = read_members(self.nodes, plan.nodes)
        self.inside = reads_of(self.nodes, plan.prologue + (plan.anchor,))
        self.outside = [value for value in reads_of(self.nodes, plan.epilogue) if value != plan.anchor]

    def prologue_lines(
        self, reads: DomainReads, index_of_dim: dict[int, str], mask: str, source: str, flat_offsets: str | None = None
    ) -> list[str]:
        """Loads and prologue ops giving the anchor's input in float32, rounded to its dtype as PyTorch stores it.

        flat_offsets: the elements' offsets in a contiguous tensor of the input domain, where contiguous reads
        may load (`DomainReads` with flat_fast_path)."""
        lines = reads.load_lines(index_of_dim, mask, flat_offsets=flat_offsets)
        lines += elementwise_lines(self.graph, self.plan.prologue, self.variables, self.scope, self.context.helpers)
        dtype = self.graph.spec_of(source).dtype
        if self.plan.prologue and dtype != "float32":
            variable = self.variables[source]
            lines += [
                f"# the prologue's result is a {dtype} tensor in PyTorch: round it before folding",
                f"{variable} = {variable}.to({TRITON_DTYPES[dtype]}).to(tl.float32)",
            ]
        return lines

    def anchor_for_epilogue(self, variable: str, dtype: str) -> list[str]:
        """Statements giving the epilogue the anchor's result as PyTorch stores it (float32 variables)."""
        self.variables[self.plan.anchor] = variable
        if not self.plan.epilogue or dtype == "float32":
            return []
        if dtype == "int64":
            self.variables[self.plan.anchor] = self.scope.fresh(f"{variable}_as_float")
            return [f"{self.variables[self.plan.anchor]} = {variable}.to(tl.float32)"]
        return [
            f"# the epilogue reads the {dtype} tensor PyTorch would store",
            f"{variable} = {variable}.to({TRITON_DTYPES[dtype]}).to(tl.float32)",
        ]

    def epilogue_lines(self, reads: DomainReads, index_of_dim: dict[int, str], mask: str) -> list[str]:
        lines = reads.load_lines(index_of_dim, mask)
        members = self.plan.epilogue
        return lines + elementwise_lines(self.graph, members, self.variables, self.scope, self.context.helpers)

    def replaced(self) -> str:
        """"aten.sum.dim_IntList (sum_1), after ... , then ..." for the kernel's docstring."""
        plan = self.plan
        text = f"{self.anchor.op} ({plan.anchor})"
        if plan.prologue:
            text += ", after " + ", ".join(f"{self.nodes[name].op} ({name})" for name in plan.prologue)
        if plan.epilogue:
            text += ", then " + ", ".join(f"{self.nodes[name].op} ({name})" for name in plan.epilogue)
        return text

    def wrapper_start(
        self, tensors: dict[str, str], input_shape: str, launches: str, reads: DomainReads, scope: NameScope,
        epilogue_reads: DomainReads | None = None,
    ) -> list[str]:
        """The wrapper's signature, docstring, reshaped reads' setup and the input domain's shape at run time (reads:
        the input domain's)."""
        plan = self.plan
        lines = [
            f"def {plan.wrapper}({', '.join(tensors.values())}):",
            f'{INDENT}"""Computes {", ".join(plan.nodes)} in {launches}."""',
        ]
        for domain_reads in (reads, epilogue_reads) if epilogue_reads else (reads,):
            lines += [INDENT + line for line in domain_reads.setup_lines(tensors, scope, self.context.helpers)]
        inside = [read for read in reads.reads if read.value in self.inside]
        full_shape = [read for read in inside if read.spec.shape == self.domain]
        if full_shape:
            lines.append(f"{INDENT}{input_shape} = {reads.shape_of(full_shape[0], tensors)}")
        else:
            # a prologue's result has the shape its inputs broadcast to
            shapes = ", ".join(reads.shape_of(read, tensors) for read in inside)
            lines.append(f"{INDENT}{input_shape} = torch.broadcast_shapes({shapes})")
        return lines

    @property
    def domain(self) -> tuple[Dim, ...]:
        raise NotImplementedError


@dataclass(frozen=True)
class _Launch:
    """What a reduce wrapper passes its kernels besides tensors: the reads (strides), what is stored,
    float scalars, the dims whose sizes the index splits divide by, and for a split the second
    kernel's size dims and the partial buffers (name -> (expression, dtype))."""

    reads_in: DomainReads
    reads_out: DomainReads
    outputs: list[tuple[str, str, str]]
    float_parameters: list[str]
    size_dims: list[int]
    output_size_dims: list[int] = field(default_factory=list)
    partials: dict[str, tuple[str, str]] = field(default_factory=dict)


class ReduceTemplate(Template):
    """Reductions over any dims: the input viewed as rows x reduced elements, ROWS rows per program."""

    name = "reduce"
    read_member_ops = GATHER_OPS + RESHAPE_OPS
    summary = (
        "sum, mean, amax/amin, max/min (values and indices), argmax/argmin, prod, logsumexp, var/std, vector norms"
    )
    parameters = (
        choice("strategy", ("single", "loop", "split"), STRATEGY_DOC),
        power_of_two("block", 16, 16384, "reduced elements per step of the loop and split strategies"),
        power_of_two("splits", 1, 1024, "programs sharing each row's reduced extent (split strategy)"),
        power_of_two("rows", 1, 256, "rows each program reduces"),
        power_of_two("warps", 1, 16, "warps per program"),
    )

    def anchor(self, node: OpNode, graph: OpGraph) -> AnchorShape | None:
        reduction = reduction_of(node, graph)
        if reduction is None:
            return None
        output_domain = None if reduction.outputs == "values_and_indices" else node.outputs[0].shape
        return AnchorShape(reduction.source, graph.spec_of(reduction.source).shape, output_domain)

    def default_parameters(self, plan: KernelPlan, graph: OpGraph) -> dict[str, Any]:
        reduction = reduction_of(next(node for node in graph.nodes if node.name == plan.anchor), graph)
        return _tiling(graph, graph.spec_of(reduction.source).shape, reduction.dims, may_split=True)

    def render(self, plan: KernelPlan, context: RenderContext) -> str:
        return ReduceKernel(plan, context).source()


class ReduceKernel(AnchoredKernelWriter):
    """One reduce kernel and its wrapper, written top to bottom."""

    fixed_names = (
        "pid", "rows", "row_mask", "row_count", "reduced_size", "reduced_count", "divisor", "columns",
        "column_mask", "mask", "start", "candidate", "indices", "ROWS", "BLOCK", "lane_totals",
        "lane_products", "lane_extremes", "lane_best", "lane_best_index", "running_max", "running_total",
        "chunk_max", "new_max", "old_shift", "shift", "chunk_count", "chunk_mean", "deviation",
        "chunk_squares", "seen", "combined", "delta", "running_mean", "running_squares", "row_mean", "split",
        "SPLITS", "partials", "partial_totals", "partial_folds", "partial_values", "partial_indices",
        "partial_maxima", "partial_counts", "partial_means", "partial_squares", "folded_value", "folded_index",
        "rescaled",
    )

    def __init__(self, plan: KernelPlan, context: RenderContext):
        super().__init__(plan, context)
        self.reduction = reduction_of(self.anchor, self.graph)
        self.strategy = plan.params["strategy"]
        self.kept = [dim for dim in range(len(self.domain)) if dim not in self.reduction.dims]
        output_to_input = range(len(self.domain)) if self.reduction.keepdim else self.kept
        # output dim -> the kept input dim it is
        self.output_dims = {position: dim for position, dim in enumerate(output_to_input) if dim in self.kept}
        self.output_domain = self.anchor.outputs[0].shape
        self.result_dtypes = [output.dtype for output in self.anchor.outputs]
        for value in self.outside:
            if value in plan.prologue:
                raise ScheduleError(
                    f"kernel reduce: epilogue op reads {value}, which the prologue computes per element",
                    "compute that value in a kernel of its own",
                )

    @property
    def domain(self) -> tuple[Dim, ...]:
        return self.graph.spec_of(self.reduction.source).shape

    def source(self) -> str:
        plan, reduction, scope, domain = self.plan, self.reduction, self.scope, self.domain
        split = self.strategy == "split"
        # folding several trailing dims, row r's element c of a contiguous input lies at r * reduced_size + c: such
        # reads skip splitting c into per-dim indices (a 64-bit division and remainder per dim and element). Folding
        # one dim needs no split; there the flat form timed slower on the H200 (an argmax over 8192 x 8192 float32:
        # 184 against 134 us), so it is not used
        folded = len(reduction.dims)
        trailing = folded > 1 and reduction.dims == tuple(range(len(domain) - folded, len(domain)))
        reads_in = DomainReads(
            self.graph, domain, self.inside, scope, self.variables, flat_fast_path=trailing, gathered=self.lookups
        )
        self.flat_offsets = "rows[:, None] * reduced_size + columns[None, :]" if trailing else None
        # the epilogue's variables join the others only after the prologue is written (a value both
        # read gets one name per domain)
        epilogue_variables: dict[str, str] = {}
        reads_out = DomainReads(
            self.graph, self.output_domain, self.outside, scope, epilogue_variables, flat_fast_path=False,
            gathered=self.lookups,
        )
        results = self._result_variables()
        row_dims_in = [dim for dim in reads_in.indexed_dims if dim in self.kept]
        row_dims_out = sorted(self.output_dims[dim] for dim in reads_out.indexed_dims)
        # with a split, the prologue runs in the first kernel and the epilogue in the second
        row_dims = row_dims_in if split else sorted(set(row_dims_in) | set(row_dims_out))
        row_lines, row_index, row_sizes = part_index_lines(domain, self.kept, row_dims, "rows", scope)
        column_dims = [dim for dim in reads_in.indexed_dims if dim in reduction.dims]
        column_lines, column_index, column_sizes = part_index_lines(domain, reduction.dims, column_dims, "columns", scope)
        index_of_dim = {dim: f"{row_index[dim]}[:, None]" for dim in row_dims_in}
        index_of_dim.update({dim: f"{column_index[dim]}[None, :]" for dim in column_dims})

        body = self._row_lines(row_lines, split)
        chunk = self._chunk_lines(reads_in, column_lines, index_of_dim)
        if self.strategy == "single":
            body += ["columns = tl.arange(0, BLOCK).to(tl.int64)"] + chunk
        else:
            body += self.fold.state_lines()
            if split:
                body += [
                    "# this program takes every SPLITS-th chunk of its rows, starting with chunk number `split`",
                    "for start in range(split * BLOCK, reduced_size, SPLITS * BLOCK):",
                ]
            else:
                body.append("for start in range(0, reduced_size, BLOCK):")
            step = ["columns = start + tl.arange(0, BLOCK).to(tl.int64)"] + chunk + self.fold.step_lines()
            body += [INDENT + line for line in step]

        partial_pointers: dict[str, str] = {}
        if split:
            partials = self._partial_states()
            partial_pointers = {name: scope.fresh(f"{name}_ptr") for name in partials}
            body += self._partial_stores(partials, partial_pointers)
            out_lines, out_index, out_sizes = part_index_lines(domain, self.kept, row_dims_out, "rows", scope)
            output_body = self._row_lines(out_lines, False) + self._partial_loads(partial_pointers)
            fold_lines, folded = self._partial_fold()
        else:
            out_index, out_sizes, output_body = row_index, row_sizes, body
            fold_lines, folded = self.fold.single_fold() if self.strategy == "single" else self.fold.loop_fold()
        output_body += fold_lines + self.fold.finish(results, folded)
        if reduction.outputs != "values_and_indices":
            output_body += self.anchor_for_epilogue(results[0], self.result_dtypes[0])
        self.variables.update(epilogue_variables)
        if plan.epilogue:
            epilogue_index = {dim: out_index[self.output_dims[dim]] for dim in reads_out.indexed_dims}
            output_body += self.epilogue_lines(reads_out, epilogue_index, "row_mask")
        stores, outputs = self._stores(results)
        output_body += stores

        float_parameters = self.fold.float_parameters(single=self.strategy == "single")
        output_pointers = [pointer for _, pointer, _ in outputs]
        plural = "s" if len(reduction.dims) > 1 else ""
        view = (
            f"Views the {domain_text(domain)} input as rows x reduced elements (dim{plural} "
            f"{', '.join(str(dim) for dim in reduction.dims)} reduced, read through strides"
            f"{', or at flat offsets where contiguous' if self.flat_offsets else ''})."
        )
        what = f"{COMBINE_DESCRIPTIONS[reduction.combine]} in float32"
        summary = f"Replaces {self.replaced()}."
        if not split:
            parameters = (
                reads_in.pointer_parameters()
                + reads_out.pointer_parameters()
                + output_pointers
                + ["row_count", "reduced_size"]
                + float_parameters
                + list(row_sizes.values())
                + list(column_sizes.values())
                + reads_in.stride_parameters()
                + reads_out.stride_parameters()
                + reads_in.flag_parameters()
                + ["ROWS: tl.constexpr", "BLOCK: tl.constexpr"]
            )
            how = (
                f"in BLOCK-wide chunks, keeping {LOOP_STATES[reduction.combine]}"
                if self.strategy == "loop"
                else "in one tile (BLOCK: the extent's next power of two)"
            )
            details = f"{view} Each program folds ROWS rows {how}, computing {what}."
            kernel = self.kernel_source(plan.kernel, parameters, summary, details, body)
            launch = _Launch(reads_in, reads_out, outputs, float_parameters, list(row_sizes) + list(column_sizes))
            return self.module_source([kernel], self._wrapper(launch))

        self.fold_kernel = scope.fresh(f"{plan.wrapper}_fold_kernel")
        partial_parameters = (
            reads_in.pointer_parameters()
            + list(partial_pointers.values())
            + ["row_count", "reduced_size"]
            + list(row_sizes.values())
            + list(column_sizes.values())
            + reads_in.stride_parameters()
            + reads_in.flag_parameters()
            + ["ROWS: tl.constexpr", "BLOCK: tl.constexpr", "SPLITS: tl.constexpr"]
        )
        partial_details = (
            f"{view} Program (i, split) folds ROWS rows over every SPLITS-th BLOCK-wide chunk, keeping "
            f"{LOOP_STATES[reduction.combine]}, and stores its partial result for {self.fold_kernel}."
        )
        fold_parameters = (
            list(partial_pointers.values())
            + reads_out.pointer_parameters()
            + output_pointers
            + ["row_count"]
            + float_parameters
            + list(out_sizes.values())
            + reads_out.stride_parameters()
            + ["ROWS: tl.constexpr", "SPLITS: tl.constexpr"]
        )
        fold_details = (
            f"Each program folds the SPLITS partial results of ROWS rows that {plan.kernel} stored, "
            f"computing {what}{', then the epilogue' if plan.epilogue else ''}."
        )
        kernels = [
            self.kernel_source(
                plan.kernel, partial_parameters, f"{summary} First of two kernels.", partial_details, body
            ),
            self.kernel_source(
                self.fold_kernel, fold_parameters, f"Second kernel of {plan.wrapper}: the row results.", fold_details,
                output_body,
            ),
        ]
        launch = _Launch(
            reads_in, reads_out, outputs, float_parameters, list(row_sizes) + list(column_sizes), list(out_sizes),
            partials,
        )
        return self.module_source(kernels, self._wrapper(launch))

    def _row_lines(self, split_lines: list[str], split: bool) -> list[str]:
        """The program's rows, and the indices of the kept dims they stand for."""
        lines = ["pid = tl.program_id(0)"]
        if split:
            lines.append("split = tl.program_id(1)")
        lines += [
            "# int64 indices: offsets into large inputs may exceed 2**31",
            "rows = pid.to(tl.int64) * ROWS + tl.arange(0, ROWS)",
            "row_mask = rows < row_count",
        ]
        if split_lines:
            lines.append("# split each row number into the indices of the kept dims")
            lines += split_lines
        return lines

    def _partial_states(self) -> dict[str, tuple[str, str]]:
        """What a split program stores per row: buffer name -> (expression, dtype)."""
        combine = self.reduction.combine
        if combine == "sum":
            return {"partial_totals": ("tl.sum(lane_totals, axis=1)", "float32")}
        if combine in ("product", "max", "min"):
            return {"partial_folds": (self.fold.loop_fold()[1], "float32")}
        if combine in ("first_max", "first_min"):
            return {"partial_values": ("folded_value", "float32"), "partial_indices": ("folded_index", "int64")}
        if combine == "logsumexp":
            return {"partial_maxima": ("running_max", "float32"), "partial_totals": ("running_total", "float32")}
        return {
            "partial_counts": ("seen", "float32"),
            "partial_means": ("running_mean", "float32"),
            "partial_squares": ("running_squares", "float32"),
        }

    def _partial_stores(self, partials: dict[str, tuple[str, str]], pointers: dict[str, str]) -> list[str]:
        lines = []
        if self.reduction.combine in ("first_max", "first_min"):
            lines.append(f"folded_value, folded_index = {self.fold.loop_fold()[1]}")
        lines.append("# partial results go to [SPLITS, row_count] buffers: split s of row r at s * row_count + r")
        for name, (expression, _) in partials.items():
            offsets = "split.to(tl.int64) * row_count + rows"
            lines.append(f"tl.store({pointers[name]} + {offsets}, {expression}, mask=row_mask)")
        return lines

    def _partial_loads(self, pointers: dict[str, str]) -> list[str]:
        lines = [
            "# split s of row r lies at s * row_count + r in the partial buffers",
            "partials = tl.arange(0, SPLITS).to(tl.int64)[None, :] * row_count + rows[:, None]",
        ]
        return lines + [
            f"{name} = tl.load({pointer} + partials, mask=row_mask[:, None])" for name, pointer in pointers.items()
        ]

    def _partial_fold(self) -> tuple[list[str], str]:
        """Statements and the expression folding each row's SPLITS partial results."""
        combine = self.reduction.combine
        if combine == "sum":
            return [], "tl.sum(partial_totals, axis=1)"
        if combine in ("product", "max", "min"):
            return [], f"tl.reduce(partial_folds, 1, {self.helper(HELPER_OF_COMBINE[combine])})"
        if combine in ("first_max", "first_min"):
            helper = self.helper(HELPER_OF_COMBINE[combine])
            return [], f"tl.reduce((partial_values, partial_indices), 1, {helper})"
        if combine == "logsumexp":
            return [
                f"running_max = tl.reduce(partial_maxima, 1, {self.helper('nan_maximum')})",
                "# each split summed exp relative to its own shift: rescale them all to the row's",
                f"old_shift = tl.where(tl.abs(partial_maxima) == {POSITIVE_INFINITY}, 0.0, partial_maxima)",
                f"shift = tl.where(tl.abs(running_max) == {POSITIVE_INFINITY}, 0.0, running_max)",
                "rescaled = partial_totals * tl.exp(old_shift - shift[:, None])",
                "# a split that saw only -inf summed nothing",
                f"running_total = tl.sum(tl.where(partial_maxima == {NEGATIVE_INFINITY}, 0.0, rescaled), axis=1)",
            ], "tl.log(running_total) + shift"
        return [
            "# merge the splits' moments: the row mean, then each split's squares about it",
            "seen = tl.sum(partial_counts, axis=1)",
            "running_mean = tl.div_rn(tl.sum(partial_counts * partial_means, axis=1), seen)",
            "deviation = partial_means - running_mean[:, None]",
        ], "tl.sum(partial_squares + partial_counts * deviation * deviation, axis=1)"

    def _result_variables(self) -> list[str]:
        """Kernel variables for the anchor's results, in the op's output order."""
        anchor = self.plan.anchor
        if self.reduction.outputs == "values_and_indices":
            return [self.scope.fresh(f"{anchor}_values"), self.scope.fresh(f"{anchor}_indices")]
        return [self.scope.fresh(anchor)]

    def _chunk_lines(self, reads_in: DomainReads, column_lines: list[str], index_of_dim: dict[int, str]) -> list[str]:
        """One tile of the input: masks, indices, loads and prologue, then the masked candidate values."""
        reduction = self.reduction
        lines = ["column_mask = columns < reduced_size", "mask = row_mask[:, None] & column_mask[None, :]"]
        if column_lines:
            lines.append("# split each reduced position into the indices of the reduced dims")
            lines += column_lines
        lines += self.prologue_lines(reads_in, index_of_dim, "mask", reduction.source, self.flat_offsets)
        self.fold = Fold(reduction, self.variables[reduction.source], FoldNames(), self.helper)
        return lines + self.fold.candidate_lines()

    def _stores(self, results: list[str]) -> tuple[list[str], list[tuple[str, str, str]]]:
        """Store statements, and what is stored in the wrapper's return order: (variable, pointer, dtype)."""
        plan = self.plan
        if self.reduction.outputs == "values_and_indices":
            variables = list(zip(results, self.result_dtypes))
        else:
            variables = [
                (results[0], self.result_dtypes[0]) if value == plan.anchor
                else (self.variables[value], self.graph.spec_of(value).dtype)
                for value in plan.outputs
            ]
        outputs = [(variable, self.scope.fresh(f"{variable}_ptr"), dtype) for variable, dtype in variables]
        lines = ["# outputs are new contiguous tensors of the kept dims: a row's result lies at its row number"]
        for variable, pointer, dtype in outputs:
            value = variable if dtype == "int64" else stored(variable, dtype)
            lines.append(f"tl.store({pointer} + rows, {value}, mask=row_mask)")
        return lines, outputs

    def _wrapper(self, launch: _Launch) -> str:
        plan, reduction, domain = self.plan, self.reduction, self.domain
        scope = self.context.scope()
        tensors = {value: scope.fresh(value) for value in plan.inputs}
        input_shape, output_shape, row_count, reduced_size, rows, block, splits, grid, fold_grid = (
            scope.fresh(name)
            for name in (
                "input_shape", "output_shape", "row_count", "reduced_size", "ROWS", "BLOCK", "SPLITS", "grid",
                "fold_grid",
            )
        )
        returned = [scope.fresh(variable) for variable, _, _ in launch.outputs]
        if self.strategy == "split":
            launches = "two launches: partial results per split, then one result per row"
        else:
            launches = f"one launch of {plan.kernel}"
        lines = self.wrapper_start(tensors, input_shape, launches, launch.reads_in, scope, launch.reads_out)
        input_arguments = launch.reads_in.pointer_arguments(tensors)
        device = f"{input_arguments[0]}.device"
        shape_items = [
            "1" if dim in reduction.dims else f"{input_shape}[{dim}]"
            for dim in range(len(domain))
            if reduction.keepdim or dim not in reduction.dims
        ]
        lines.append(f"{INDENT}{output_shape} = {tuple_text(shape_items)}")
        for variable, (_, _, dtype) in zip(returned, launch.outputs):
            lines.append(f"{INDENT}{variable} = torch.empty({output_shape}, dtype=torch.{dtype}, device={device})")
        lines.append(f"{INDENT}{row_count} = {product_text([f'{input_shape}[{dim}]' for dim in self.kept])}")
        lines.append(f"{INDENT}{reduced_size} = {product_text([f'{input_shape}[{dim}]' for dim in reduction.dims])}")
        in_strides, in_stride_arguments, in_flags = launch.reads_in.wrapper_arguments(tensors, scope)
        out_strides, out_stride_arguments, _ = launch.reads_out.wrapper_arguments(tensors, scope)
        lines += [INDENT + line for line in in_strides + out_strides]
        block_value = f"triton.next_power_of_2({reduced_size})" if self.strategy == "single" else plan.params["block"]
        lines += [f"{INDENT}{rows} = {plan.params['rows']}", f"{INDENT}{block} = {block_value}"]
        epilogue_arguments = launch.reads_out.pointer_arguments(tensors)
        floats = [self.fold.float_argument(name, reduced_size) for name in launch.float_parameters]
        warps = f"num_warps={plan.params['warps']}"
        if self.strategy != "split":
            lines += [f"{INDENT}# one program per {rows} rows", f"{INDENT}{grid} = (triton.cdiv({row_count}, {rows}),)"]
            arguments = (
                input_arguments
                + epilogue_arguments
                + returned
                + [row_count, reduced_size]
                + floats
                + [f"{input_shape}[{dim}]" for dim in launch.size_dims]
                + in_stride_arguments
                + out_stride_arguments
                + in_flags
                + [f"ROWS={rows}", f"BLOCK={block}", warps]
            )
            lines += launch_lines(plan.kernel, grid, arguments)
        else:
            buffers = {name: scope.fresh(name) for name in launch.partials}
            lines.append(f"{INDENT}{splits} = {plan.params['splits']}")
            lines += [
                f"{INDENT}{buffers[name]} = torch.empty(({splits}, {row_count}), dtype=torch.{dtype}, device={device})"
                for name, (_, dtype) in launch.partials.items()
            ]
            lines += [
                f"{INDENT}# {splits} programs share the reduced extent of each {rows} rows; the second kernel folds",
                f"{INDENT}# their partial results",
                f"{INDENT}{grid} = (triton.cdiv({row_count}, {rows}), {splits})",
            ]
            arguments = (
                input_arguments
                + list(buffers.values())
                + [row_count, reduced_size]
                + [f"{input_shape}[{dim}]" for dim in launch.size_dims]
                + in_stride_arguments
                + in_flags
                + [f"ROWS={rows}", f"BLOCK={block}", f"SPLITS={splits}", warps]
            )
            lines += launch_lines(plan.kernel, grid, arguments)
            lines.append(f"{INDENT}{fold_grid} = (triton.cdiv({row_count}, {rows}),)")
            arguments = (
                list(buffers.values())
                + epilogue_arguments
                + returned
                + [row_count]
                + floats
                + [f"{input_shape}[{dim}]" for dim in launch.output_size_dims]
                + out_stride_arguments
                + [f"ROWS={rows}", f"SPLITS={splits}", warps]
            )
            lines += launch_lines(self.fold_kernel, fold_grid, arguments)
        lines.append(f"{INDENT}return {', '.join(returned)}")
        return "\n".join(lines) + "\n"


class ScanTemplate(Template):
    """Cumulative sums and products along one dim: ROWS lines per program, each scanned in order."""

    name = "scan"
    summary = "cumsum, cumprod"
    parameters = (
        choice("strategy", ("single", "loop"), SCAN_STRATEGY_DOC),
        power_of_two("block", 16, 16384, "scanned elements per step of the loop strategy"),
        power_of_two("rows", 1, 256, "lines each program scans"),
        power_of_two("warps", 1, 16, "warps per program"),
    )

    def anchor(self, node: OpNode, graph: OpGraph) -> AnchorShape | None:
        scan = scan_of(node, graph)
        if scan is None:
            return None
        shape = graph.spec_of(scan.source).shape
        return AnchorShape(scan.source, shape, shape)

    def default_parameters(self, plan: KernelPlan, graph: OpGraph) -> dict[str, Any]:
        scan = scan_of(next(node for node in graph.nodes if node.name == plan.anchor), graph)
        return _tiling(graph, graph.spec_of(scan.source).shape, (scan.dim,), may_split=False)

    def render(self, plan: KernelPlan, context: RenderContext) -> str:
        return ScanKernel(plan, context).source()


class ScanKernel(AnchoredKernelWriter):
    """One scan kernel and its wrapper; prologue, scan and epilogue share the input's domain."""

    fixed_names = (
        "pid", "rows", "row_mask", "row_count", "line_length", "inner_size", "row_offsets", "positions",
        "position_mask", "mask", "start", "candidate", "carry", "offsets", "ROWS", "BLOCK",
    )

    def __init__(self, plan: KernelPlan, context: RenderContext):
        super().__init__(plan, context)
        self.scan = scan_of(self.anchor, self.graph)
        self.loop = plan.params["strategy"] == "loop"

    @property
    def domain(self) -> tuple[Dim, ...]:
        return self.graph.spec_of(self.scan.source).shape

    def source(self) -> str:
        plan, scan, scope, domain = self.plan, self.scan, self.scope, self.domain
        values = self.inside + [value for value in self.outside if value not in self.inside]
        reads = DomainReads(self.graph, domain, values, scope, self.variables, flat_fast_path=False)
        kept = [dim for dim in range(len(domain)) if dim != scan.dim]
        row_dims = [dim for dim in reads.indexed_dims if dim != scan.dim]
        row_lines, row_index, row_sizes = part_index_lines(domain, kept, row_dims, "rows", scope)
        index_of_dim = {dim: f"{row_index[dim]}[:, None]" for dim in row_dims}
        if scan.dim in reads.indexed_dims:
            index_of_dim[scan.dim] = "positions[None, :]"
        result = scope.fresh(plan.anchor)
        dtype = self.anchor.spec.dtype
        neutral = "0.0" if scan.combine == "sum" else "1.0"

        step = [
            f"positions = {'start + ' if self.loop else ''}tl.arange(0, BLOCK).to(tl.int64)",
            "position_mask = positions < line_length",
            "mask = row_mask[:, None] & position_mask[None, :]",
        ]
        step += self.prologue_lines(reads, index_of_dim, "mask", scan.source)
        step += [
            f"# masked-off lanes hold {neutral}, which leaves every prefix unchanged",
            f"candidate = tl.where(mask, {self.variables[scan.source]}, {neutral})",
        ]
        scanned = "tl.cumsum(candidate, axis=1)" if scan.combine == "sum" else "tl.cumprod(candidate, axis=1)"
        if not self.loop:
            step.append(f"{result} = {scanned}")
        elif scan.combine == "sum":
            step += [
                "# carry: each line's sum over the chunks before this one",
                f"{result} = carry[:, None] + {scanned}",
                "carry += tl.sum(candidate, axis=1)",
            ]
        else:
            step += [
                "# carry: each line's product over the chunks before this one",
                f"{result} = carry[:, None] * {scanned}",
                f"carry *= tl.reduce(candidate, 1, {self.helper('multiply')})",
            ]
        step += self.anchor_for_epilogue(result, dtype)
        step += elementwise_lines(self.graph, plan.epilogue, self.variables, scope, self.context.helpers)
        outputs = [
            (result, dtype) if value == plan.anchor else (self.variables[value], self.graph.spec_of(value).dtype)
            for value in plan.outputs
        ]
        pointers = [scope.fresh(f"{variable}_ptr") for variable, _ in outputs]
        step.append("offsets = row_offsets[:, None] + positions[None, :] * inner_size")
        step += [
            f"tl.store({pointer} + offsets, {stored(variable, value_dtype)}, mask=mask)"
            for pointer, (variable, value_dtype) in zip(pointers, outputs)
        ]

        body = [
            "pid = tl.program_id(0)",
            "# int64 indices: offsets into large inputs may exceed 2**31",
            "rows = pid.to(tl.int64) * ROWS + tl.arange(0, ROWS)",
            "row_mask = rows < row_count",
        ]
        if row_lines:
            body.append("# split each line number into the indices of the other dims")
            body += row_lines
        body += [
            "# outputs are new contiguous tensors: a line starts at its outer index * line_length * inner_size",
            "# plus its inner index, and its elements lie inner_size apart",
            "row_offsets = (rows // inner_size) * line_length * inner_size + rows % inner_size",
        ]
        if self.loop:
            body.append(f"carry = tl.full([ROWS], {neutral}, tl.float32)")
            body.append("for start in range(0, line_length, BLOCK):")
            body += [INDENT + line for line in step]
        else:
            body += step

        parameters = (
            reads.pointer_parameters()
            + pointers
            + ["row_count", "line_length", "inner_size"]
            + list(row_sizes.values())
            + reads.stride_parameters()
            + ["ROWS: tl.constexpr", "BLOCK: tl.constexpr"]
        )
        how = f"in BLOCK-wide chunks, carrying each line's running {scan.combine}" if self.loop else (
            "in one tile (BLOCK: the line length's next power of two)"
        )
        what = "sums" if scan.combine == "sum" else "products"
        details = (
            f"Views the {domain_text(domain)} input as lines along dim {scan.dim} (read through strides). "
            f"Each program scans ROWS lines {how}, computing prefix {what} in float32."
        )
        kernel = self.kernel_source(plan.kernel, parameters, f"Replaces {self.replaced()}.", details, body)
        return self.module_source([kernel], self._wrapper(reads, values, outputs, list(row_sizes), kept))

    def _wrapper(
        self,
        reads: DomainReads,
        values: list[str],
        outputs: list[tuple[str, str]],
        size_dims: list[int],
        kept: list[int],
    ) -> str:
        plan, dim = self.plan, self.scan.dim
        scope = self.context.scope()
        tensors = {value: scope.fresh(value) for value in plan.inputs}
        input_shape, row_count, line_length, inner_size, rows, block, grid = (
            scope.fresh(name)
            for name in ("input_shape", "row_count", "line_length", "inner_size", "ROWS", "BLOCK", "grid")
        )
        returned = [scope.fresh(variable) for variable, _ in outputs]
        device = f"{tensors[self.inside[0]]}.device"
        lines = self.wrapper_start(tensors, input_shape, f"one launch of {plan.kernel}", reads, scope)
        for variable, (_, dtype) in zip(returned, outputs):
            lines.append(f"{INDENT}{variable} = torch.empty({input_shape}, dtype=torch.{dtype}, device={device})")
        inner = [f"{input_shape}[{other}]" for other in kept if other > dim]
        lines += [
            f"{INDENT}{line_length} = {input_shape}[{dim}]",
            f"{INDENT}{row_count} = {product_text([f'{input_shape}[{other}]' for other in kept])}",
            f"{INDENT}{inner_size} = {product_text(inner)}",
        ]
        stride_lines, stride_arguments, _ = reads.wrapper_arguments(tensors, scope)
        lines += [INDENT + line for line in stride_lines]
        block_value = plan.params["block"] if self.loop else f"triton.next_power_of_2({line_length})"
        lines += [
            f"{INDENT}{rows} = {plan.params['rows']}",
            f"{INDENT}{block} = {block_value}",
            f"{INDENT}# one program per {rows} lines",
            f"{INDENT}{grid} = (triton.cdiv({row_count}, {rows}),)",
            f"{INDENT}{plan.kernel}[{grid}](",
        ]
        arguments = (
            [tensors[value] for value in values]
            + returned
            + [row_count, line_length, inner_size]
            + [f"{input_shape}[{other}]" for other in size_dims]
            + stride_arguments
            + [f"ROWS={rows}", f"BLOCK={block}", f"num_warps={plan.params['warps']}"]
        )
        lines += [f"{INDENT * 2}{argument}," for argument in arguments]
        lines += [f"{INDENT})", f"{INDENT}return {', '.join(returned)}"]
        return "\n".join(lines) + "\n"
