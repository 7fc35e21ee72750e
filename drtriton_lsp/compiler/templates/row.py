"""The row template: reductions over a tensor's trailing dims and the pointwise ops before, between and after
them in one kernel whose programs take whole rows (a softmax, layer norm or RMS norm written out by hand).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any, Sequence

from drtriton_lsp.compiler.elementwise import TRITON_DTYPES
from drtriton_lsp.compiler.graph import Dim, OpGraph
from drtriton_lsp.compiler.partition import group_inputs
from drtriton_lsp.compiler.templates.base import (
    KernelPlan,
    RenderContext,
    Template,
    example_extent,
    next_power_of_two,
    power_of_two,
)
from drtriton_lsp.compiler.templates.fold import Fold, FoldNames, Reduction, reduced_shape, reduction_of
from drtriton_lsp.compiler.templates.normalize import loop_chunk, row_tiling, strategy_parameter
from drtriton_lsp.compiler.templates.pointwise import INDENT, DomainReads, domain_text, elementwise_lines, stored
from drtriton_lsp.compiler.templates.writer import KernelWriter, launch_lines, part_index_lines, product_text, tuple_text

# Unmeasured guess, kept below normalize's 32768: a row kernel may hold several full-row values at once
# (softmax: the input and its exp), so whole rows in registers should stop sooner
ROW_SINGLE_PASS_LIMIT = 8192
STRATEGY_DOC = (
    "single: each program holds whole rows in registers (every input read once); "
    "loopN: rows stream through in chunks of N columns, once per reduction that needs an earlier one "
    "(softmax: the max, then the sum), then once more for the outputs"
)
# names every reduction's fold reads from the tile they share
SHARED_FOLD_NAMES = ("mask", "column_mask", "columns", "reduced_count")


class RowGroupError(ValueError):
    """Why one row kernel cannot compute some ops: the problem, and a hint (the planner adds the line)."""

    def __init__(self, problem: str, hint: str):
        super().__init__(problem)
        self.problem, self.hint = problem, hint


@dataclass(frozen=True)
class RowGroup:
    """The ops of one row kernel, seen per row.

    domain: the shape every reduction folds; its leading dims number the rows, `column_dims` (the trailing
    dims, reduced) the elements of a row. reductions: member -> what it computes, in graph order. full:
    pointwise members over the whole domain. per_row: pointwise members with one value per row (the
    reductions' shape, with or without the reduced dims). ready: per-row value -> the pass over the rows
    after which it is known: a reduction's is the pass that folds it, one after the last pass whose values
    its input reads (a layer norm's variance reads the mean: pass 2); 0 for per-row ops reading no reduction.
    """

    domain: tuple[Dim, ...]
    column_dims: tuple[int, ...]
    reductions: dict[str, Reduction]
    full: tuple[str, ...]
    per_row: tuple[str, ...]
    ready: dict[str, int]

    @property
    def row_dims(self) -> tuple[int, ...]:
        return tuple(dim for dim in range(len(self.domain)) if dim not in self.column_dims)

    @property
    def passes(self) -> int:
        """Passes over the rows that fold reductions (the loop strategy adds one for full-row outputs)."""
        return max(self.ready[name] for name in self.reductions)


def _dims_text(dims: Sequence[int]) -> str:
    return f"dim{'s' if len(dims) > 1 else ''} {', '.join(str(dim) for dim in dims)}"


def row_group(graph: OpGraph, members: Sequence[str]) -> RowGroup:
    """How one row kernel computes `members` (graph order: elementwise ops, and reductions the reduce
    template computes); raises RowGroupError when it cannot."""
    nodes = {node.name: node for node in graph.nodes}
    reductions = {name: reduction for name in members if (reduction := reduction_of(nodes[name], graph)) is not None}
    if not reductions:
        raise RowGroupError(
            "it computes no reduction", "a row kernel fuses reductions with the pointwise ops around them"
        )
    first, first_reduction = next(iter(reductions.items()))
    domain = tuple(graph.spec_of(first_reduction.source).shape)
    rank, column_dims = len(domain), first_reduction.dims
    if column_dims != tuple(range(rank - len(column_dims), rank)):
        raise RowGroupError(
            f"{first} reduces {_dims_text(column_dims)} of {domain_text(domain)}, which are not its trailing dims",
            "a row kernel folds the trailing dims of its rows; compute it in a reduce kernel",
        )
    for name, reduction in reductions.items():
        if reduction.outputs != "values":
            raise RowGroupError(f"{name} ({nodes[name].op}) returns indices", "compute it in a reduce kernel")
        shape = tuple(graph.spec_of(reduction.source).shape)
        if shape != domain or reduction.dims != column_dims:
            raise RowGroupError(
                f"{name} reduces {_dims_text(reduction.dims)} of {domain_text(shape)}, not the rows {first} folds "
                f"({_dims_text(column_dims)} of {domain_text(domain)})",
                "the reductions of a row kernel fold the same trailing dims of one shape",
            )
    kept_shape = reduced_shape(domain, column_dims, True)
    per_row_shapes = (kept_shape, reduced_shape(domain, column_dims, False))
    full: list[str] = []
    per_row: list[str] = []
    for name in members:
        shape = tuple(nodes[name].spec.shape)
        if name in reductions:
            continue
        if shape == domain:
            full.append(name)
        elif shape in per_row_shapes:
            per_row.append(name)
        else:
            raise RowGroupError(
                f"{name} computes a {domain_text(shape)} tensor: neither the rows ({domain_text(domain)}) nor one "
                f"value per row ({' or '.join(domain_text(row_shape) for row_shape in per_row_shapes)})",
                "compute it in a kernel of its own",
            )
    member_set, full_set = set(members), set(full)
    ready: dict[str, int] = {}
    # full value -> the last pass whose per-row values it reads, directly or through other full values
    needs: dict[str, int] = {}
    for name in members:
        shape = tuple(nodes[name].spec.shape)
        refs = [ref for ref in nodes[name].input_refs() if ref in member_set]
        if name in reductions:
            source = reductions[name].source
            if source in ready:
                raise RowGroupError(f"{name} reduces {source}, which holds one value per row", "reduce a full row")
            ready[name] = needs.get(source, 0) + 1
        elif name in full_set:
            for ref in refs:
                if ref in ready and tuple(nodes[ref].spec.shape) != kept_shape:
                    raise RowGroupError(
                        f"{name} reads {ref} ({domain_text(nodes[ref].spec.shape)}), one value per row without the "
                        "reduced dims, which broadcasts along the rows instead of across each row",
                        "reduce with keepdim=True so each row's value broadcasts over its row",
                    )
            needs[name] = max([ready.get(ref, 0) for ref in refs] + [needs.get(ref, 0) for ref in refs], default=0)
        else:
            for ref in refs:
                if tuple(nodes[ref].spec.shape) != shape:
                    raise RowGroupError(
                        f"{name} ({domain_text(shape)}, one value per row) reads {ref} "
                        f"({domain_text(nodes[ref].spec.shape)}), which is not in the same per-row shape",
                        "compute it in a kernel of its own",
                    )
            ready[name] = max((ready[ref] for ref in refs), default=0)
    return RowGroup(domain, column_dims, reductions, tuple(full), tuple(per_row), ready)


class RowTemplate(Template):
    """Reductions over the trailing dims with the pointwise ops around them, ROWS whole rows per program.

    It anchors no op: the default schedule never picks it, and a script line or the search does.
    """

    name = "row"
    summary = "reductions over trailing dims fused with the pointwise ops before, between and after them"
    parameters = (
        strategy_parameter(STRATEGY_DOC),
        power_of_two("rows", 1, 128, "rows each program computes together (several when rows are short)"),
        power_of_two("warps", 1, 16, "warps per program"),
    )

    def default_parameters(self, plan: KernelPlan, graph: OpGraph) -> dict[str, Any]:
        group = row_group(graph, plan.nodes)
        row_length = example_extent([group.domain[dim] for dim in group.column_dims], graph)
        n_rows = example_extent([group.domain[dim] for dim in group.row_dims], graph)
        return row_tiling(row_length, n_rows, ROW_SINGLE_PASS_LIMIT)

    def search_parameters(self, defaults: dict[str, Any]) -> list[dict[str, Any]]:
        """Warps and rows one step from the default; whole rows against chunks of 1024 and 4096 columns (a
        chunked default against whole rows and half or twice its chunk); then warps and rows two steps away.
        Nearest first: a search measures only the first few of a fragment's candidates."""
        specs = {spec.name: spec for spec in self.parameters}

        def moved(name: str, step: int) -> list[dict[str, Any]]:
            values = specs[name].values
            position = values.index(defaults[name]) + step
            return [{**defaults, name: values[position]}] if 0 <= position < len(values) else []

        chunk = loop_chunk(defaults["strategy"])
        if chunk is None:
            strategies = ["loop1024", "loop4096"]
        else:
            strategies = ["single"] + [f"loop{size}" for size in (chunk // 2, chunk * 2) if 16 <= size <= 16384]
        near = [variant for step in (1, -1) for name in ("warps", "rows") for variant in moved(name, step)]
        far = [variant for step in (2, -2) for name in ("warps", "rows") for variant in moved(name, step)]
        return near + [{**defaults, "strategy": strategy} for strategy in strategies] + far

    def render(self, plan: KernelPlan, context: RenderContext) -> str:
        return RowKernel(plan, context).source()


class RowKernel(KernelWriter):
    """One row kernel and its wrapper. Per-row values are [ROWS, 1] columns, so they broadcast across
    each row's [ROWS, BLOCK] tile as PyTorch broadcasts a keepdim reduction."""

    fixed_names = (
        "pid", "rows", "row_mask", "n_rows", "row_length", "columns", "column_start", "column_mask", "mask",
        "offsets", "reduced_count", "ROWS", "BLOCK",
    )  # fmt: skip

    def __init__(self, plan: KernelPlan, context: RenderContext):
        super().__init__(plan, context)
        group = self.group = row_group(self.graph, plan.nodes)
        self.chunk = loop_chunk(plan.params["strategy"])
        self.members = set(plan.nodes)
        self.full_set = set(group.full)
        # a member another member reads is rounded to its dtype first, as PyTorch stores it
        self.read_in_kernel = {ref for name in plan.nodes for ref in self.nodes[name].input_refs()} & self.members
        # values loaded over the rows' elements (by full ops and reductions), and per row (by per-row ops)
        self.full_read_variables: dict[str, str] = {}
        self.full_reads = DomainReads(
            self.graph, group.domain, self._loaded(group.full + tuple(group.reductions)), self.scope,
            self.full_read_variables, flat_fast_path=True,
        )  # fmt: skip
        # per-row shape -> what per-row ops of that shape load, and the variables they load into
        self.row_reads: dict[tuple[Dim, ...], DomainReads] = {}
        self.row_read_variables: dict[tuple[Dim, ...], dict[str, str]] = {}
        per_row_of_shape: dict[tuple[Dim, ...], list[str]] = {}
        for name in group.per_row:
            per_row_of_shape.setdefault(self._shape(name), []).append(name)
        for shape, names in per_row_of_shape.items():
            loaded = self._loaded(names)
            if loaded:
                variables = self.row_read_variables[shape] = {}
                self.row_reads[shape] = DomainReads(
                    self.graph, shape, loaded, self.scope, variables, flat_fast_path=False
                )
        row_needed = {dim for dim in self.full_reads.indexed_dims if dim in group.row_dims}
        for reads in self.row_reads.values():
            row_needed.update(reads.indexed_dims)
        self.row_index_lines, row_index, self.row_sizes = part_index_lines(
            group.domain, group.row_dims, sorted(row_needed), "rows", self.scope
        )
        column_needed = [dim for dim in self.full_reads.indexed_dims if dim in group.column_dims]
        self.column_index_lines, column_index, self.column_sizes = part_index_lines(
            group.domain, group.column_dims, column_needed, "columns", self.scope
        )
        self.row_index_of_dim = {dim: f"{row_index[dim]}[:, None]" for dim in sorted(row_needed)}
        self.full_index_of_dim = self.row_index_of_dim | {dim: f"{column_index[dim]}[None, :]" for dim in column_needed}
        self.output_pointers = {value: self.scope.fresh(f"{value}_ptr") for value in plan.outputs}
        # per-row values known so far: reductions' results and per-row ops
        self.row_values: dict[str, str] = {}
        self.folds: list[Fold] = []

    def _shape(self, name: str) -> tuple[Dim, ...]:
        return tuple(self.nodes[name].spec.shape)

    def _loaded(self, readers: Sequence[str]) -> list[str]:
        """Values `readers` read that the kernel does not compute, in order of first use."""
        return [value for value in group_inputs(self.nodes, readers) if value not in self.members]

    # ----- kernel body ---------------------------------------------------------------------------

    def source(self) -> str:
        group, plan = self.group, self.plan
        body = [
            "pid = tl.program_id(0)",
            "# int64 indices: offsets into large inputs may exceed 2**31",
            "rows = pid.to(tl.int64) * ROWS + tl.arange(0, ROWS)",
            "row_mask = rows < n_rows",
        ]
        if self.row_index_lines:
            body.append("# split each row number into the indices of the leading dims, for inputs read through strides")
            body += self.row_index_lines
        for reads in self.row_reads.values():
            body += reads.load_lines(self.row_index_of_dim, "row_mask[:, None]")
        if self.chunk is None:
            body += self._single_lines()
        else:
            body += self._per_row_lines([name for name in group.per_row if group.ready[name] == 0])
            for number in range(1, group.passes + 1):
                body += self._pass_lines(number)
            full_outputs = [value for value in plan.outputs if value in self.full_set]
            if full_outputs:
                body += self._output_pass_lines(full_outputs)

        # float parameter -> the fold whose wrapper expression gives it (reduced_count is shared)
        float_parameters: dict[str, Fold] = {}
        for fold in self.folds:
            for name in fold.float_parameters(single=self.chunk is None):
                float_parameters.setdefault(name, fold)
        row_reads = list(self.row_reads.values())
        parameters = (
            self.full_reads.pointer_parameters()
            + [pointer for reads in row_reads for pointer in reads.pointer_parameters()]
            + list(self.output_pointers.values())
            + ["n_rows", "row_length"]
            + list(float_parameters)
            + list(self.row_sizes.values())
            + list(self.column_sizes.values())
            + self.full_reads.stride_parameters()
            + [stride for reads in row_reads for stride in reads.stride_parameters()]
            + self.full_reads.flag_parameters()
            + ["ROWS: tl.constexpr", "BLOCK: tl.constexpr"]
        )
        replaced = ", ".join(f"{op} ({node})" for node, op in zip(plan.nodes, plan.ops))
        kernel = self.kernel_source(plan.kernel, parameters, f"Replaces {replaced}.", self._details(), body)
        return self.module_source([kernel], self._wrapper(float_parameters))

    def _details(self) -> str:
        group = self.group
        rows = (
            f"Each row is the elements along {_dims_text(group.column_dims)} of the {domain_text(group.domain)} "
            "domain, one row per index of the other dims; each reduction folds a row in float32 into one value "
            "per row, which the ops after it read broadcast across the row."
        )
        if self.chunk is None:
            return f"{rows} Each program holds ROWS whole rows in registers (BLOCK >= the row length), reading each input once."
        passes = [
            f"pass {number} folds {', '.join(name for name in group.reductions if group.ready[name] == number)}"
            for number in range(1, group.passes + 1)
        ]
        if any(value in self.full_set for value in self.plan.outputs):
            passes.append("a last pass computes and stores the full-row outputs")
        return (
            f"{rows} Each program streams ROWS rows through in chunks of BLOCK columns, recomputing what each pass "
            f"needs from its inputs: {'; '.join(passes)}."
        )

    def _chunk_lines(self) -> list[str]:
        """Masks, flat offsets and column indices of the current columns."""
        lines = [
            "column_mask = columns < row_length",
            "mask = row_mask[:, None] & column_mask[None, :]",
            "# full-row outputs are new contiguous tensors: element (row, column) lies at row * row_length + column",
            "offsets = rows[:, None] * row_length + columns[None, :]",
        ]
        if self.column_index_lines:
            lines.append("# split each column number into the indices of the reduced dims, for strided inputs")
            lines += self.column_index_lines
        return lines

    def _loop(self, step: list[str]) -> list[str]:
        """A loop over each row's chunks of BLOCK columns, running `step` on each."""
        step = ["columns = column_start + tl.arange(0, BLOCK).to(tl.int64)"] + self._chunk_lines() + step
        return ["for column_start in range(0, row_length, BLOCK):"] + [INDENT + line for line in step]

    def _single_lines(self) -> list[str]:
        """Whole rows in one tile: every member in graph order, each computed once."""
        group = self.group
        lines = ["columns = tl.arange(0, BLOCK).to(tl.int64)"] + self._chunk_lines()
        lines += self.full_reads.load_lines(self.full_index_of_dim, "mask", flat_offsets="offsets")
        known = {**self.full_read_variables}
        def kind(name: str) -> str:
            return "full" if name in self.full_set else "reduction" if name in group.reductions else "row"

        for kind_of_run, run in itertools.groupby(self.plan.nodes, key=kind):
            names = list(run)
            if kind_of_run == "full":
                lines += self._compute(names, {**known, **self.row_values}, known)
            elif kind_of_run == "row":
                lines += self._per_row_lines(names)
            else:
                for name in names:
                    fold = self._fold(name, known)
                    lines += fold.candidate_lines() + self._finish_lines(name, fold, *fold.single_fold())
        full_outputs = [value for value in self.plan.outputs if value in self.full_set]
        return lines + self._full_stores(full_outputs, known)

    def _pass_lines(self, number: int) -> list[str]:
        """Pass `number` of the loop strategy: its reductions folded chunk by chunk, then the per-row ops it makes known."""
        group = self.group
        folded = [name for name in group.reductions if group.ready[name] == number]
        known: dict[str, str] = {}
        step = self._full_lines([group.reductions[name].source for name in folded], known)
        states: list[str] = []
        finishing: list[str] = []
        for name in folded:
            fold = self._fold(name, known)
            states += fold.state_lines()
            step += fold.candidate_lines() + fold.step_lines()
            finishing += self._finish_lines(name, fold, *fold.loop_fold())
        lines = [f"# pass {number}: fold {', '.join(folded)} over the rows' chunks"] + states + self._loop(step)
        ready = [name for name in group.per_row if group.ready[name] == number]
        return lines + finishing + self._per_row_lines(ready)

    def _output_pass_lines(self, outputs: Sequence[str]) -> list[str]:
        """The loop strategy's last pass: the full-row outputs, recomputed chunk by chunk and stored."""
        known: dict[str, str] = {}
        step = self._full_lines(outputs, known) + self._full_stores(outputs, known)
        return ["# last pass: compute and store the full-row outputs"] + self._loop(step)

    def _full_lines(self, values: Sequence[str], known: dict[str, str]) -> list[str]:
        """For one chunk: the loads and full-row ops giving `values` (full-row members, or inputs), from the
        inputs and the per-row values known; their variables go into `known`."""
        needed: set[str] = set()
        pending = [value for value in values if value in self.full_set]
        while pending:
            value = pending.pop()
            if value not in needed:
                needed.add(value)
                pending += [ref for ref in self.nodes[value].input_refs() if ref in self.full_set]
        members = [name for name in self.group.full if name in needed]
        loaded = self._loaded(members) + [value for value in values if value in self.full_read_variables]
        lines = self.full_reads.load_lines(self.full_index_of_dim, "mask", flat_offsets="offsets", values=loaded)
        known.update(self.full_read_variables)
        return lines + self._compute(members, {**known, **self.row_values}, known)

    def _full_stores(self, values: Sequence[str], known: dict[str, str]) -> list[str]:
        stores = []
        for value in values:
            variable = stored(known[value], self.nodes[value].spec.dtype)
            stores.append(f"tl.store({self.output_pointers[value]} + offsets, {variable}, mask=mask)")
        return stores

    def _compute(self, members: Sequence[str], variables: dict[str, str], known: dict[str, str]) -> list[str]:
        """Statements computing pointwise `members` from `variables`; their variables go into `known`."""
        lines = elementwise_lines(
            self.graph, members, variables, self.scope, self.context.helpers, read_elsewhere=self.read_in_kernel
        )
        known.update({member: variables[member] for member in members})
        return lines

    def _per_row_lines(self, names: Sequence[str]) -> list[str]:
        """Per-row ops (graph order) from the per-row values known and their per-row inputs, and their stores."""
        lines: list[str] = []
        for shape, run in itertools.groupby(names, key=self._shape):
            read_variables = self.row_read_variables.get(shape, {})
            lines += self._compute(list(run), {**read_variables, **self.row_values}, self.row_values)
        return lines + self._row_stores(names)

    def _row_stores(self, names: Sequence[str]) -> list[str]:
        return [
            f"tl.store({self.output_pointers[name]} + rows[:, None], "
            f"{stored(self.row_values[name], self.nodes[name].spec.dtype)}, mask=row_mask[:, None])"
            for name in names
            if name in self.output_pointers
        ]

    def _fold(self, name: str, known: dict[str, str]) -> Fold:
        reduction = self.group.reductions[name]
        fold = Fold(reduction, known[reduction.source], FoldNames(self.scope, name, SHARED_FOLD_NAMES), self.helper)
        self.folds.append(fold)
        return fold

    def _finish_lines(self, name: str, fold: Fold, statements: list[str], folded: str) -> list[str]:
        """The reduction's [ROWS, 1] column of values, rounded to its dtype if other ops read it; stored if read outside."""
        result = self.row_values[name] = self.scope.fresh(name)
        lines = statements + fold.finish([result], folded)
        lines += ["# one value per row, as a column that broadcasts across the row", f"{result} = {result}[:, None]"]
        dtype = self.nodes[name].spec.dtype
        if dtype != "float32" and name in self.read_in_kernel:
            lines += [
                f"# {name} is {dtype} in PyTorch: round it before the next op reads it",
                f"{result} = {result}.to({TRITON_DTYPES[dtype]}).to(tl.float32)",
            ]
        return lines + self._row_stores([name])

    # ----- wrapper -------------------------------------------------------------------------------

    def _wrapper(self, float_parameters: dict[str, Fold]) -> str:
        plan, group, graph = self.plan, self.group, self.graph
        scope = self.context.scope()
        tensors = {value: scope.fresh(value) for value in plan.inputs}
        outputs = {value: scope.fresh(value) for value in plan.outputs}
        domain_shape, n_rows, row_length, rows, block, grid = (
            scope.fresh(name) for name in ("domain_shape", "n_rows", "row_length", "ROWS", "BLOCK", "grid")
        )
        # a dim's size: a literal where the graph fixes it
        size = {
            dim: str(extent) if isinstance(extent, int) else f"{domain_shape}[{dim}]"
            for dim, extent in enumerate(group.domain)
        }
        returned = ", ".join(outputs.values())
        lines = [
            f"def {plan.wrapper}({', '.join(tensors.values())}):",
            f'{INDENT}"""Computes {", ".join(plan.nodes)} in one launch of {plan.kernel}; returns {returned}."""',
        ]
        full_values = [read.value for read in self.full_reads.reads]
        full_shape = [value for value in full_values if tuple(graph.spec_of(value).shape) == group.domain]
        if full_shape:
            lines.append(f"{INDENT}{domain_shape} = {tensors[full_shape[0]]}.shape")
        else:
            # the first reduction's input is computed from these, so they broadcast to the rows' shape
            shapes = ", ".join(f"{tensors[value]}.shape" for value in full_values)
            lines.append(f"{INDENT}{domain_shape} = torch.broadcast_shapes({shapes})")
        # the per-row shapes outputs and per-row inputs have: the reduced dims kept as 1, or left out
        used_shapes = {tuple(graph.spec_of(value).shape) for value in plan.outputs}
        used_shapes.update(self.row_reads)
        row_shapes: dict[tuple[Dim, ...], str] = {}
        for keepdim in (True, False):
            shape = reduced_shape(group.domain, group.column_dims, keepdim)
            if shape in row_shapes or shape not in used_shapes or shape == group.domain:
                continue
            items = [
                "1" if dim in group.column_dims else size[dim]
                for dim in range(len(group.domain))
                if keepdim or dim not in group.column_dims
            ]
            row_shapes[shape] = scope.fresh("row_shape")
            lines.append(f"{INDENT}{row_shapes[shape]} = {tuple_text(items)}")
        device = f"{next(iter(tensors.values()))}.device"
        for value, variable in outputs.items():
            shape = tuple(graph.spec_of(value).shape)
            shape_text = domain_shape if shape == group.domain else row_shapes[shape]
            dtype = graph.spec_of(value).dtype
            lines.append(f"{INDENT}{variable} = torch.empty({shape_text}, dtype=torch.{dtype}, device={device})")
        lines += [
            f"{INDENT}# rows are the leading dims, and a row's elements the reduced trailing dims",
            f"{INDENT}{n_rows} = {product_text([size[dim] for dim in group.row_dims])}",
            f"{INDENT}{row_length} = {product_text([size[dim] for dim in group.column_dims])}",
        ]
        stride_lines, stride_arguments, flag_arguments = self.full_reads.wrapper_arguments(tensors, scope)
        for shape, reads in self.row_reads.items():
            row_stride_lines, row_stride_arguments, _ = reads.wrapper_arguments(tensors, scope)
            stride_lines += row_stride_lines
            stride_arguments += row_stride_arguments
        lines += [INDENT + line for line in stride_lines]
        lines.append(f"{INDENT}{rows} = {plan.params['rows']}")
        if self.chunk is not None:
            lines += [f"{INDENT}# columns per loop step", f"{INDENT}{block} = {self.chunk}"]
        else:
            static = [extent for dim, extent in enumerate(group.domain) if dim in group.column_dims]
            if all(isinstance(extent, int) for extent in static):
                padded = next_power_of_two(math.prod(static))
                lines += [f"{INDENT}# whole rows, padded to a power of two", f"{INDENT}{block} = {padded}"]
            else:
                padded = f"triton.next_power_of_2({row_length})"
                lines += [f"{INDENT}# whole rows, padded to a power of two", f"{INDENT}{block} = {padded}"]
        lines += [f"{INDENT}# one program per {rows} rows", f"{INDENT}{grid} = (triton.cdiv({n_rows}, {rows}),)"]
        row_reads = list(self.row_reads.values())
        arguments = (
            [tensors[value] for value in full_values]
            + [tensors[read.value] for reads in row_reads for read in reads.reads]
            + list(outputs.values())
            + [n_rows, row_length]
            + [fold.float_argument(name, row_length) for name, fold in float_parameters.items()]
            + [size[dim] for dim in list(self.row_sizes) + list(self.column_sizes)]
            + stride_arguments
            + flag_arguments
            + [f"ROWS={rows}", f"BLOCK={block}", f"num_warps={plan.params['warps']}"]
        )
        lines += launch_lines(plan.kernel, grid, arguments)
        lines.append(f"{INDENT}return {returned}")
        return "\n".join(lines) + "\n"
