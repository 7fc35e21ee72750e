"""The normalize template: softmax, log_softmax, and layer, RMS, group, instance and inference batch norm.

Each kernel views the op's input as rows of the elements normalised together, computes every row's
statistics in float32, normalises, and runs fused prologue and epilogue ops, reading inputs through strides.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any, Sequence

from drtriton_lsp.compiler.elementwise import (
    FUSIBLE_DTYPES,
    READABLE_DTYPES,
    TRITON_DTYPES,
    bind_arguments,
    is_finite_number,
)
from drtriton_lsp.compiler.gather import GATHER_OPS, read_members, reads_of
from drtriton_lsp.compiler.graph import Dim, OpGraph, OpNode, TensorSpec
from drtriton_lsp.compiler.reshape_reads import RESHAPE_OPS
from drtriton_lsp.compiler.templates.base import (
    AnchorShape,
    KernelPlan,
    ParameterSpec,
    RenderContext,
    Template,
    example_size,
    next_power_of_two,
    power_of_two,
)
from drtriton_lsp.compiler.templates.pointwise import (
    CHANNELS_LAST_ORDER,
    INDENT,
    DomainReads,
    domain_text,
    elementwise_lines,
    flat_index_lines,
    stored,
)
from drtriton_lsp.compiler.templates.writer import H200_STREAMING_MULTIPROCESSORS

# the family of computation behind each overload
FAMILIES = {
    "aten.softmax.int": "softmax",
    "aten._softmax.default": "softmax",
    "aten.log_softmax.int": "log_softmax",
    "aten._log_softmax.default": "log_softmax",
    "aten.layer_norm.default": "layer_norm",
    "aten.rms_norm.default": "rms_norm",
    "aten.group_norm.default": "group_norm",
    "aten.instance_norm.default": "instance_norm",
    "aten.batch_norm.default": "batch_norm",
}
# rms_norm with eps=None adds the epsilon of its float32 math type for every input dtype
# (measured on torch 2.13: float16 inputs get 2**-23, not torch.finfo(torch.float16).eps)
RMS_NORM_DEFAULT_EPS = 2.0**-23
# Defaults, measured on an H200 (torch 2.11, triton 3.6; float16 and float32 rows of 768 to 65536):
# the longest padded row one program holds in registers; longer rows loop in chunks of LOOP_CHUNK
SINGLE_PASS_LIMIT = 32768
# group_norm gathers its per-channel parameters along the row, which costs registers: a 32768-long
# row ran 1.5x faster looping than whole
GROUPED_SINGLE_PASS_LIMIT = 8192
LOOP_CHUNK = 4096
LOOP_WARPS = 16
# elements a program of short rows aims to hold (several rows at once)
TILE_ELEMENTS = 2048
# elements each thread holds: fewer (more warps) was slower at every row length tried
ELEMENTS_PER_THREAD = 32
# names the kernel body spells literally; taken first, so a graph value with one of them is renamed
KERNEL_NAMES = (
    "pid", "rows", "row_mask", "row_starts", "columns", "column_start", "mask", "offsets",
    "n_rows", "row_length", "inner_size", "channels_per_group", "ROWS", "BLOCK",
    "row_values", "row_max", "row_sum", "log_sum", "shifted", "numerator", "running_max", "running_sum",
    "new_max", "mean", "centered", "variance", "rstd", "lane_count", "lane_mean", "lane_m2", "delta",
    "lane_offset", "lane_squares", "mean_square",
)  # fmt: skip


STRATEGY_DOC = (
    "single: each program holds whole rows in registers (one read and one write per element); "
    "loopN: rows too long for registers stream through in chunks of N columns, first for the "
    "statistics, then to normalise and store (the input is read twice)"
)


def strategy_parameter(doc: str = STRATEGY_DOC) -> ParameterSpec:
    """`single` or `loop<N>` (N a power of two: the columns each loop step covers)."""
    chunk = power_of_two("strategy", 16, 16384, "")

    def parse(text: str) -> str:
        if text == "single":
            return text
        if not text.startswith("loop"):
            raise ValueError(f"expected single or loop<N>, got {text!r}")
        try:
            chunk.parse(text.removeprefix("loop"))
        except ValueError as error:
            raise ValueError(f"in {text!r}: {error}") from None
        return text

    values = ("single",) + tuple(f"loop{size}" for size in chunk.values)
    return ParameterSpec("strategy", parse, str, doc, values)


def loop_chunk(strategy: str) -> int | None:
    """Columns per loop step of a `loop<N>` strategy; None for `single`."""
    return None if strategy == "single" else int(strategy.removeprefix("loop"))


@dataclass(frozen=True)
class RowLayout:
    """The op's domain seen as [rows, row_length].

    virtual_shape: the domain's dims, except that group_norm splits dim 1 into (groups, channels per
    group). parts: per domain dim, the virtual dims whose indices make up its index (row-major).
    row_dims / column_dims: the virtual dims the row number and the column number run over, row-major.
    groups: group_norm's group count (None otherwise).
    """

    virtual_shape: tuple[Dim, ...]
    parts: tuple[tuple[int, ...], ...]
    row_dims: tuple[int, ...]
    column_dims: tuple[int, ...]
    groups: int | None = None

    @classmethod
    def over(cls, domain: tuple[Dim, ...], column_dims: Sequence[int]) -> "RowLayout":
        rank = len(domain)
        rows = tuple(dim for dim in range(rank) if dim not in column_dims)
        return cls(domain, tuple((dim,) for dim in range(rank)), rows, tuple(column_dims))

    @classmethod
    def grouped(cls, domain: tuple[Dim, ...], groups: int) -> "RowLayout":
        channels = domain[1]
        # a symbolic channel count: any name but 1 marks the dim as varying
        per_group = channels // groups if isinstance(channels, int) else f"{channels}/{groups}"
        virtual = (domain[0], groups, per_group) + tuple(domain[2:])
        parts = ((0,), (1, 2)) + tuple((dim + 1,) for dim in range(2, len(domain)))
        return cls(virtual, parts, (0, 1), tuple(range(2, len(virtual))), groups)

    @property
    def rows_interleave(self) -> bool:
        """Whether some row dim lies after the normalised dims (softmax over a dim that is not last)."""
        last_column = max(self.column_dims)
        return any(dim > last_column and self.virtual_shape[dim] != 1 for dim in self.row_dims)


@dataclass(frozen=True)
class Normalization:
    """What one anchored op computes, read from its arguments.

    statistics: "softmax", "log_softmax", "mean_variance" (layer, group and instance norm),
    "mean_square" (rms_norm), or None (running statistics: inference batch and instance norm).
    weight, bias: per normalised element (layer_norm, rms_norm) or per channel (`per_channel`).
    channel_dim: the domain dim per-channel vectors are indexed along (3 in a channels-last kernel's (n, h, w, c)).
    source_rounding: the dtype softmax's `dtype` argument converts the input to first, if that rounds.
    """

    statistics: str | None
    source: str
    domain: tuple[Dim, ...]
    layout: RowLayout
    eps: float | None = None
    weight: str | None = None
    bias: str | None = None
    per_channel: bool = False
    running_mean: str | None = None
    running_var: str | None = None
    source_rounding: str | None = None
    channel_dim: int = 1

    def channel_values(self) -> dict[str, str]:
        """Per-channel vectors the kernel loads by channel index, by role."""
        if not self.per_channel:
            return {}
        roles = {"weight": self.weight, "bias": self.bias, "mean": self.running_mean, "var": self.running_var}
        return {role: value for role, value in roles.items() if value is not None}


def read_normalization(node: OpNode, graph: OpGraph) -> Normalization | None:
    """The op's computation if this template reproduces PyTorch's forward exactly, else None."""
    family = FAMILIES.get(node.op)
    if family is None or len(node.outputs) != 1:
        return None
    bound = bind_arguments(node)
    source = _tensor_reference(bound.get("input", bound.get("self")), graph)
    if source is None or node.spec.dtype not in FUSIBLE_DTYPES:
        return None
    domain = tuple(graph.spec_of(source).shape)
    if not domain or domain != tuple(node.spec.shape):
        return None
    if family in ("softmax", "log_softmax"):
        return _softmax(family, bound, source, domain, graph)
    if family in ("layer_norm", "rms_norm"):
        return _trailing_norm(family, bound, source, domain, graph)
    if family == "group_norm":
        return _group_norm(bound, source, domain, graph)
    return _channel_norm(family, bound, source, domain, graph)


def _softmax(family: str, bound: dict[str, Any], source: str, domain: tuple[Dim, ...], graph: OpGraph):
    dim = bound["dim"]
    if isinstance(dim, bool) or not isinstance(dim, int) or not -len(domain) <= dim < len(domain):
        return None
    if bound.get("half_to_float", False) is not False:
        return None  # float16 in, float32 out in one call: PyTorch's CPU kernels reject it, so it stays there
    rounding = None
    requested = bound.get("dtype")
    if requested is not None:
        if not isinstance(requested, dict) or requested.get("dtype") not in FUSIBLE_DTYPES:
            return None
        # softmax(x, dtype=d) is softmax(x.to(d)); widening to float32 is exact
        source_dtype = graph.spec_of(source).dtype
        if requested["dtype"] not in (source_dtype, "float32"):
            rounding = requested["dtype"]
    layout = RowLayout.over(domain, (dim % len(domain),))
    return Normalization(family, source, domain, layout, source_rounding=rounding)


def _trailing_norm(family: str, bound: dict[str, Any], source: str, domain: tuple[Dim, ...], graph: OpGraph):
    shape = bound["normalized_shape"]
    if not isinstance(shape, dict) or not 1 <= len(shape.get("list", ())) <= len(domain):
        return None
    eps = bound["eps"]
    if family == "rms_norm" and eps is None:
        eps = RMS_NORM_DEFAULT_EPS
    weight, bias = bound.get("weight"), bound.get("bias")
    weights = [_tensor_reference(value, graph) for value in (weight, bias) if value is not None]
    if None in weights or not is_finite_number(eps):
        return None
    layout = RowLayout.over(domain, range(len(domain) - len(shape["list"]), len(domain)))
    statistics = "mean_variance" if family == "layer_norm" else "mean_square"
    return Normalization(
        statistics, source, domain, layout, float(eps),
        weight=_tensor_reference(weight, graph), bias=_tensor_reference(bias, graph),
    )  # fmt: skip


def _group_norm(bound: dict[str, Any], source: str, domain: tuple[Dim, ...], graph: OpGraph):
    groups = bound["num_groups"]
    if len(domain) < 2 or isinstance(groups, bool) or not isinstance(groups, int) or groups < 1:
        return None
    if isinstance(domain[1], int) and domain[1] % groups:
        return None
    weight, bias = bound["weight"], bound["bias"]
    if any(value is not None and _tensor_reference(value, graph) is None for value in (weight, bias)):
        return None
    if not is_finite_number(bound["eps"]):
        return None
    return Normalization(
        "mean_variance", source, domain, RowLayout.grouped(domain, groups), float(bound["eps"]),
        weight=_tensor_reference(weight, graph), bias=_tensor_reference(bias, graph), per_channel=True,
    )  # fmt: skip


def _channel_norm(family: str, bound: dict[str, Any], source: str, domain: tuple[Dim, ...], graph: OpGraph):
    """instance_norm and batch_norm: batch statistics per (sample, channel), or running statistics per channel."""
    tensors = {name: bound[name] for name in ("weight", "bias", "running_mean", "running_var")}
    if any(value is not None and _tensor_reference(value, graph) is None for value in tensors.values()):
        return None
    has_running = tensors["running_mean"] is not None and tensors["running_var"] is not None
    no_running = tensors["running_mean"] is None and tensors["running_var"] is None
    if family == "instance_norm":
        # batch statistics with running stats given would also update them: left to PyTorch
        use_batch_statistics = bound["use_input_stats"] is True and no_running
        use_running = bound["use_input_stats"] is False and has_running
        if len(domain) < 3 or not (use_batch_statistics or use_running):
            return None
    else:
        if bound["training"] is not False or not has_running or len(domain) < 2:
            return None
        use_batch_statistics = False
    if not is_finite_number(bound["eps"]):
        return None
    references = {name: _tensor_reference(value, graph) for name, value in tensors.items()}
    columns = range(2, len(domain)) if len(domain) > 2 else (1,)
    return Normalization(
        "mean_variance" if use_batch_statistics else None, source, domain, RowLayout.over(domain, columns),
        float(bound["eps"]), weight=references["weight"], bias=references["bias"], per_channel=True,
        running_mean=None if use_batch_statistics else references["running_mean"],
        running_var=None if use_batch_statistics else references["running_var"],
    )  # fmt: skip


def _tensor_reference(value: Any, graph: OpGraph) -> str | None:
    """The name of a floating-point tensor argument, or None for anything else."""
    if not isinstance(value, dict) or "ref" not in value:
        return None
    spec = graph.spec_of(value["ref"])
    return value["ref"] if spec is not None and spec.dtype in FUSIBLE_DTYPES else None


def _is_tensor(graph: OpGraph, value: str) -> bool:
    spec = graph.spec_of(value)
    return spec is not None and spec.dtype in READABLE_DTYPES


def _external_reads(nodes: dict[str, OpNode], members: Sequence[str], computed: set[str]) -> list[str]:
    """Values `members` read that the kernel does not compute (`computed`), in order of first use."""
    reads: list[str] = []
    for member in members:
        if member not in computed:
            continue
        for ref in nodes[member].input_refs():
            if ref not in computed and ref not in reads:
                reads.append(ref)
    return reads


def _anchor_node(graph: OpGraph, name: str | None) -> OpNode:
    return next(node for node in graph.nodes if node.name == name)


class NormalizeTemplate(Template):
    """Ops normalising rows of their input: statistics per row, then an output of the input's shape."""

    name = "normalize"
    read_member_ops = GATHER_OPS + RESHAPE_OPS
    summary = "softmax, log_softmax, layer_norm, rms_norm, group_norm, instance_norm, batch_norm (inference)"
    parameters = (
        strategy_parameter(),
        power_of_two("rows", 1, 128, "rows each program normalises together (several when rows are short)"),
        power_of_two("warps", 1, 16, "warps per program"),
    )

    def anchor(self, node: OpNode, graph: OpGraph) -> AnchorShape | None:
        normalization = read_normalization(node, graph)
        if normalization is None:
            return None
        return AnchorShape(normalization.source, normalization.domain, tuple(node.spec.shape))

    def default_parameters(self, plan: KernelPlan, graph: OpGraph) -> dict[str, Any]:
        normalization = read_normalization(_anchor_node(graph, plan.anchor), graph)
        layout = normalization.layout
        hints = [_size_hint(normalization, dim, graph) for dim in range(len(layout.virtual_shape))]
        row_length = math.prod(hints[dim] for dim in layout.column_dims)
        n_rows = math.prod(hints[dim] for dim in layout.row_dims)
        single_limit = SINGLE_PASS_LIMIT if layout.groups is None else GROUPED_SINGLE_PASS_LIMIT
        return row_tiling(row_length, n_rows, single_limit)

    def render(self, plan: KernelPlan, context: RenderContext) -> str:
        normalization = read_normalization(_anchor_node(context.graph, plan.anchor), context.graph)
        kernel = NormalizeKernel(plan, context, normalization)
        variant = _channels_last_variant(plan, context, normalization)
        if variant is None:
            return kernel.kernel_source() + "\n\n" + kernel.wrapper_source()
        variant_source, variant_wrapper = variant
        return kernel.kernel_source() + "\n\n" + kernel.wrapper_source(variant_wrapper) + "\n\n" + variant_source


def _channels_last_variant(
    plan: KernelPlan, context: RenderContext, normalization: Normalization
) -> tuple[str, str] | None:
    """(source, wrapper name) of the same kernel for a channels-last input: an inference batch norm of a 4-d input
    and its epilogue, run over the input's (n, h, w, c) view with the channels as columns, so reads and writes follow
    memory; the result is channels-last, as PyTorch's batch norm gives for such an input. None where it does not
    apply (batch statistics, a prologue, an epilogue that reads a per-channel vector itself, or a read member: an
    embedding lookup or a reshape reads through its own operands' layout, not the (n, h, w, c) view)."""
    graph, domain = context.graph, normalization.domain
    channel_vectors = set(normalization.channel_values().values())
    nodes = {node.name: node for node in graph.nodes}
    if (
        normalization.statistics is not None
        or not normalization.per_channel
        or len(domain) != 4
        or domain[1] == 1
        or plan.prologue
        or normalization.source not in plan.inputs
        or any(ref in channel_vectors for member in plan.epilogue for ref in nodes[member].input_refs())
        or read_members(nodes, plan.nodes)
    ):
        return None
    relaid = (set(plan.inputs) | set(plan.nodes)) - channel_vectors

    def relaid_spec(name: str, spec: TensorSpec | None) -> TensorSpec | None:
        if spec is None or name not in relaid:
            return spec
        padded = (1,) * (4 - spec.rank) + tuple(spec.shape)
        return TensorSpec(tuple(padded[dim] for dim in CHANNELS_LAST_ORDER), spec.dtype)

    relaid_graph = replace(
        graph,
        inputs=[replace(item, spec=relaid_spec(item.name, item.spec)) for item in graph.inputs],
        nodes=[
            replace(node, outputs=(relaid_spec(node.name, node.spec),)) if len(node.outputs) == 1 else node
            for node in graph.nodes
        ],
    )
    relaid_domain = tuple(domain[dim] for dim in CHANNELS_LAST_ORDER)
    relaid_norm = replace(
        normalization, domain=relaid_domain, layout=RowLayout.over(relaid_domain, (3,)), channel_dim=3
    )
    scope = context.scope()
    names = {
        "wrapper": scope.fresh(f"{plan.wrapper}_channels_last"),
        "kernel": scope.fresh(f"{plan.kernel}_channels_last"),
        "inner": scope.fresh(f"{plan.wrapper}_over_nhwc"),
    }
    pixels = math.prod(example_size(size, graph) for size in (domain[0], domain[2], domain[3]))
    relaid_plan = replace(
        plan, domain=relaid_domain, wrapper=names["inner"], kernel=names["kernel"],
        params=row_tiling(example_size(domain[1], graph), pixels, SINGLE_PASS_LIMIT),
    )  # fmt: skip
    relaid_context = replace(context, graph=relaid_graph, module_names=context.module_names + tuple(names.values()))
    inner = NormalizeKernel(relaid_plan, relaid_context, relaid_norm)

    parameters = {value: scope.fresh(value) for value in plan.inputs}
    arguments = []
    for value, name in parameters.items():
        spec = graph.spec_of(value)
        if value not in relaid or spec is None or not _is_tensor(graph, value):
            arguments.append(name)
        else:
            padding = "" if spec.rank == 4 else "[" + ", ".join(["None"] * (4 - spec.rank)) + "]"
            arguments.append(f"{name}{padding}.permute(0, 2, 3, 1)")
    results = [scope.fresh(value) for value in plan.outputs]
    adapter = [
        f"def {names['wrapper']}({', '.join(parameters.values())}):",
        f'{INDENT}"""{plan.wrapper} for a channels-last input: {names["inner"]} runs over the (n, h, w, c) views of the',
        f'{INDENT}tensors (memory order, channels as the columns); the results are channels-last, as PyTorch\'s are."""',
        f"{INDENT}{', '.join(results)} = {names['inner']}({', '.join(arguments)})",
        f"{INDENT}return {', '.join(f'{result}.permute(0, 3, 1, 2)' for result in results)}",
    ]
    source = inner.kernel_source() + "\n\n" + inner.wrapper_source() + "\n\n" + "\n".join(adapter) + "\n"
    return source, names["wrapper"]


def row_tiling(row_length: int, n_rows: int, single_limit: int) -> dict[str, Any]:
    """Default strategy, rows and warps for `n_rows` rows of `row_length` (example sizes): whole rows in
    registers up to `single_limit` padded columns, else LOOP_CHUNK-wide chunks."""
    padded = next_power_of_two(row_length)
    if padded > single_limit:
        return {"strategy": f"loop{LOOP_CHUNK}", "rows": 1, "warps": LOOP_WARPS}
    rows = 1
    # short rows: several per program, as long as every SM still gets a couple of programs
    while rows < 128 and rows * padded < TILE_ELEMENTS and n_rows >= rows * 4 * H200_STREAMING_MULTIPROCESSORS:
        rows *= 2
    warps = min(16, next_power_of_two(max(1, rows * padded // (32 * ELEMENTS_PER_THREAD))))
    return {"strategy": "single", "rows": rows, "warps": warps}


def _size_hint(normalization: Normalization, dim: int, graph: OpGraph) -> int:
    """The example size of a virtual dim (a symbolic channel count splits into groups of its hint)."""
    layout = normalization.layout
    size = layout.virtual_shape[dim]
    if isinstance(size, int):
        return size
    if layout.groups is not None and dim == 2:
        channels = normalization.domain[1]
        return max(1, example_size(channels, graph) // layout.groups)
    return example_size(size, graph)


class NormalizeKernel:
    """Renders one normalize kernel and its launch wrapper from a plan."""

    def __init__(self, plan: KernelPlan, context: RenderContext, normalization: Normalization):
        self.plan, self.graph, self.norm, self.context = plan, context.graph, normalization, context
        self.layout = normalization.layout
        self.chunk = loop_chunk(plan.params["strategy"])
        scope = self.scope = context.scope()
        for fixed in KERNEL_NAMES:
            scope.fresh(fixed)
        graph = self.graph
        nodes = {node.name: node for node in graph.nodes}
        lookups = read_members(nodes, plan.nodes)
        self.variables: dict[str, str] = {}
        # what the kernel computes: a read member's value (an embedding lookup, a reshape) is read, not computed
        computed = set(plan.nodes) - set(lookups)
        input_values = reads_of(nodes, plan.prologue) if plan.prologue else [normalization.source]
        output_values: list[str] = []
        trailing_weights = [] if normalization.per_channel else [normalization.weight, normalization.bias]
        for value in trailing_weights + _external_reads(nodes, plan.epilogue, computed):
            if value is not None and value not in input_values and value not in output_values:
                output_values.append(value)
        domain = normalization.domain
        self.input_reads = DomainReads(
            graph, domain, input_values, scope, self.variables, flat_fast_path=True, gathered=lookups
        )
        self.output_reads = DomainReads(
            graph, domain, output_values, scope, self.variables, flat_fast_path=True, gathered=lookups
        )
        self.channels = normalization.channel_values()
        self.channel_variables = {role: scope.fresh(f"channel_{role}") for role in self.channels}
        self.channel_pointers = {role: scope.fresh(f"channel_{role}_ptr") for role in self.channels}
        self.channel_varies = bool(self.channels) and domain[normalization.channel_dim] != 1
        strided = self.channels if self.channel_varies else {}
        self.channel_strides = {role: scope.fresh(f"channel_{role}_stride") for role in strided}
        self.channel_scale = scope.fresh("channel_scale") if normalization.statistics is None else None
        self.output_pointers = {value: scope.fresh(f"{value}_ptr") for value in plan.outputs}
        self._plan_indices()
        self.prologue_lines = self._prologue_lines(context)
        self.variables[plan.anchor] = scope.fresh(plan.anchor)
        self.epilogue_lines = self._epilogue_lines(context)

    # ----- indices -------------------------------------------------------------------------------

    def _plan_indices(self) -> None:
        """Which per-dim indices the kernel computes, and the expression for each domain dim's index."""
        layout = self.layout
        needed_domain_dims = set(self.input_reads.indexed_dims) | set(self.output_reads.indexed_dims)
        if self.channel_varies:
            needed_domain_dims.add(self.norm.channel_dim)
        needed = sorted(
            {part for dim in needed_domain_dims for part in layout.parts[dim] if layout.virtual_shape[part] != 1}
        )

        def only(dims: tuple[int, ...]) -> tuple[Dim, ...]:
            return tuple(size if dim in dims else 1 for dim, size in enumerate(layout.virtual_shape))

        self.row_index_lines, row_indices, self.row_sizes = flat_index_lines(
            only(layout.row_dims), [dim for dim in needed if dim in layout.row_dims], "rows", self.scope
        )
        self.column_index_lines, column_indices, self.column_sizes = flat_index_lines(
            only(layout.column_dims), [dim for dim in needed if dim in layout.column_dims], "columns", self.scope
        )
        self.uses_channels_per_group = False
        self.index_of_dim: dict[int, str] = {}
        for dim in sorted(needed_domain_dims):
            terms = [
                f"{row_indices[part]}[:, None]"
                if part in row_indices
                else f"{column_indices[part]}.to(tl.int64)[None, :]"
                for part in layout.parts[dim]
                if layout.virtual_shape[part] != 1
            ]
            if len(terms) == 2:
                self.uses_channels_per_group = True
                self.index_of_dim[dim] = f"({terms[0]} * channels_per_group + {terms[1]})"
            else:
                self.index_of_dim[dim] = terms[0]
        # the domain dims that only the rows run along: a load indexed by them alone needs only the rows' mask
        row_only = [
            dim
            for dim in range(len(layout.parts))
            if all(part in layout.row_dims for part in layout.parts[dim] if layout.virtual_shape[part] != 1)
        ]
        self.row_mask = (row_only, "row_mask[:, None]")
        self.channel_needs_columns = self.channel_varies and any(
            part in layout.column_dims and layout.virtual_shape[part] != 1
            for part in layout.parts[self.norm.channel_dim]
        )

    # ----- pointwise stages ----------------------------------------------------------------------

    def _prologue_lines(self, context: RenderContext) -> list[str]:
        """The prologue in float32, each value rounded to its dtype where the anchor or epilogue reads it."""
        plan, graph, norm = self.plan, self.graph, self.norm
        lines = elementwise_lines(graph, plan.prologue, self.variables, self.scope, context.helpers)
        nodes = {node.name: node for node in graph.nodes}
        read_in_prologue = {ref for member in plan.prologue for ref in nodes[member].input_refs()}
        read_later = {ref for member in (plan.anchor,) + plan.epilogue for ref in nodes[member].input_refs()}
        for member in plan.prologue:
            dtype = nodes[member].spec.dtype
            if dtype != "float32" and member in read_later and member not in read_in_prologue:
                variable = self.variables[member]
                lines.append(f"# {member} is {dtype} in PyTorch: round it before the next op reads it")
                lines.append(f"{variable} = {variable}.to({TRITON_DTYPES[dtype]}).to(tl.float32)")
        self.source_variable = self.variables[norm.source]
        if norm.source_rounding is not None:
            rounded = self.scope.fresh(f"{self.source_variable}_{norm.source_rounding}")
            lines.append(f"# dtype={norm.source_rounding}: PyTorch converts the input before the softmax")
            lines.append(
                f"{rounded} = {self.source_variable}.to({TRITON_DTYPES[norm.source_rounding]}).to(tl.float32)"
            )
            self.source_variable = rounded
        return lines

    def _epilogue_lines(self, context: RenderContext) -> list[str]:
        plan, graph = self.plan, self.graph
        nodes = {node.name: node for node in graph.nodes}
        lines: list[str] = []
        dtype = nodes[plan.anchor].spec.dtype
        if dtype != "float32" and any(plan.anchor in nodes[member].input_refs() for member in plan.epilogue):
            anchor = self.variables[plan.anchor]
            lines.append(f"# {plan.anchor} is {dtype} in PyTorch: round it before the epilogue reads it")
            lines.append(f"{anchor} = {anchor}.to({TRITON_DTYPES[dtype]}).to(tl.float32)")
        return lines + elementwise_lines(graph, plan.epilogue, self.variables, self.scope, context.helpers)

    # ----- kernel --------------------------------------------------------------------------------

    def kernel_source(self) -> str:
        plan = self.plan
        body = [
            "pid = tl.program_id(0)",
            "# int64 rows, and column indices widened before they meet a stride: offsets may exceed 2**31",
            "rows = pid.to(tl.int64) * ROWS + tl.arange(0, ROWS)",
            "# the masks guard the last program's rows, and each row's padding up to a multiple of BLOCK",
            "row_mask = rows < n_rows",
        ]
        if self.layout.rows_interleave:
            body += [
                "# the normalised dim is not innermost: a row starts at outer * row_length * inner_size + inner",
                "row_starts = rows // inner_size * row_length * inner_size + rows % inner_size",
            ]
        if self.row_index_lines:
            body.append("# split row numbers into per-dimension indices, for inputs read through strides")
            body += self.row_index_lines
        if not self.channel_needs_columns:
            body += self._channel_lines()
        if self.chunk is None:
            body.append("columns = tl.arange(0, BLOCK)")
            body += self._column_lines(with_channels=True) + self._input_lines()
            body += self._single_pass_statistics() + self._result_lines()
        else:
            if self.norm.statistics is not None:
                body += self._loop_statistics()
                body.append("# second pass: normalise, run the epilogue, store")
            body.append("for column_start in range(0, row_length, BLOCK):")
            loop = self._chunk_lines(with_channels=True) + self._input_lines() + self._result_lines()
            body += [INDENT + line for line in loop]

        lines = ["@triton.jit", f"def {plan.kernel}("]
        lines += [f"{INDENT}{parameter}," for parameter in self._kernel_parameters()]
        lines += ["):", f'{INDENT}"""{self._docstring()}', f'{INDENT}"""']
        lines += [f"{INDENT}{line}" for line in body]
        return "\n".join(lines) + "\n"

    def _kernel_parameters(self) -> list[str]:
        sizes = ["n_rows", "row_length"]
        if self.layout.rows_interleave:
            sizes.append("inner_size")
        if self.uses_channels_per_group:
            sizes.append("channels_per_group")
        return (
            self.input_reads.pointer_parameters()
            + self.output_reads.pointer_parameters()
            + list(self.channel_pointers.values())
            + list(self.output_pointers.values())
            + sizes
            + list(self.row_sizes.values())
            + list(self.column_sizes.values())
            + self.input_reads.stride_parameters()
            + self.output_reads.stride_parameters()
            + list(self.channel_strides.values())
            + self.input_reads.flag_parameters()
            + self.output_reads.flag_parameters()
            + ["ROWS: tl.constexpr", "BLOCK: tl.constexpr"]
        )

    def _docstring(self) -> str:
        plan, norm, layout = self.plan, self.norm, self.layout
        replaced = ", ".join(f"{op} ({node})" for node, op in zip(plan.nodes, plan.ops))
        if layout.groups is not None:
            spatial = ", ".join(str(dim) for dim in range(2, len(norm.domain)))
            rows = (
                f"Each row is one of {layout.groups} channel groups of the {domain_text(norm.domain)} domain "
                f"(its channels{f' over dims {spatial}' if spatial else ''}), one per group and index of dim 0."
            )
        else:
            columns = ", ".join(str(dim) for dim in layout.column_dims)
            plural = "s" if len(layout.column_dims) > 1 else ""
            rows = (
                f"Each row is the elements along dim{plural} {columns} of the {domain_text(norm.domain)} domain, "
                "one row per index of the other dims."
            )
        if self.chunk is None:
            how = "Each program holds ROWS whole rows in registers (BLOCK >= the row length): one read, one write."
        elif norm.statistics is None:
            how = "Each program streams ROWS rows through in chunks of BLOCK columns: one read, one write."
        else:
            how = (
                "Each program streams ROWS rows through in chunks of BLOCK columns twice: "
                "once for the statistics, once to normalise and store."
            )
        statistics = {
            "softmax": "Statistics in float32: the row max and the sum of exp(x - max).",
            "log_softmax": "Statistics in float32: the row max and the sum of exp(x - max).",
            "mean_variance": "Statistics in float32: the mean and the biased variance.",
            "mean_square": "Statistics in float32: the mean of squares.",
            None: "Inference mode: each channel's running mean and variance make one scale and shift.",
        }[norm.statistics]
        parts = [f"Replaces {replaced}.", "", rows, how, statistics]
        if plan.prologue:
            parts.append(f"The prologue ({', '.join(plan.prologue)}) computes the input in the kernel.")
        if plan.epilogue:
            parts.append(f"The epilogue ({', '.join(plan.epilogue)}) runs on the result before it is stored.")
        return "\n".join(f"{INDENT}{part}" if part else "" for part in parts).removeprefix(INDENT)

    def _chunk_lines(self, *, with_channels: bool) -> list[str]:
        """The columns of one loop step, with their masks, offsets and indices."""
        return ["columns = column_start + tl.arange(0, BLOCK)"] + self._column_lines(
            with_channels=with_channels
        )

    def _column_lines(self, *, with_channels: bool) -> list[str]:
        """Mask, flat offsets and column indices of the current columns (and channel loads that need them)."""
        lines = ["mask = row_mask[:, None] & (columns < row_length)[None, :]"]
        if self.layout.rows_interleave:
            lines.append("offsets = row_starts[:, None] + columns[None, :].to(tl.int64) * inner_size")
        else:
            lines.append("offsets = rows[:, None] * row_length + columns[None, :]")
        if self.column_index_lines:
            lines.append("# split column numbers into per-dimension indices, for inputs read through strides")
            lines += self.column_index_lines
        if with_channels and self.channel_needs_columns:
            lines += self._channel_lines()
        return lines

    def _channel_lines(self) -> list[str]:
        """Loads of the per-channel vectors (weight, bias, running statistics) at each row's or element's channel."""
        if not self.channels:
            return []
        mask = "mask" if self.channel_needs_columns else "row_mask[:, None]"
        where = "element" if self.channel_needs_columns else "row"
        lines = [f"# per-channel parameters, gathered at each {where}'s channel"]
        for role, value in self.channels.items():
            convert = "" if self.graph.spec_of(value).dtype == "float32" else ".to(tl.float32)"
            pointer = self.channel_pointers[role]
            if self.channel_varies:
                address = f"{pointer} + {self.index_of_dim[self.norm.channel_dim]} * {self.channel_strides[role]}"
                lines.append(f"{self.channel_variables[role]} = tl.load({address}, mask={mask}){convert}")
            else:
                lines.append(f"{self.channel_variables[role]} = tl.load({pointer}){convert}")
        if self.channel_scale is not None:
            scale = f"tl.rsqrt({self.channel_variables['var']} + {self.norm.eps!r})"
            if "weight" in self.channels:
                scale += f" * {self.channel_variables['weight']}"
            lines.append("# fixed running statistics: each channel is one scale and shift")
            lines.append(f"{self.channel_scale} = {scale}")
        return lines

    def _input_lines(self) -> list[str]:
        """Load what the input stage reads and run the prologue: the normalised value, in float32."""
        return (
            self.input_reads.load_lines(self.index_of_dim, "mask", flat_offsets="offsets", narrow_mask=self.row_mask)
            + self.prologue_lines
        )

    def _single_pass_statistics(self) -> list[str]:
        x, statistics, eps = self.source_variable, self.norm.statistics, self.norm.eps
        if statistics in ("softmax", "log_softmax"):
            return [
                "# padding lanes hold -inf: the max ignores them, and exp(-inf) = 0 adds nothing to the sum",
                f'row_values = tl.where(mask, {x}, float("-inf"))',
                "row_max = tl.max(row_values, axis=1)",
                "shifted = row_values - row_max[:, None]",
                "numerator = tl.exp(shifted)",
                "row_sum = tl.sum(numerator, axis=1)",
            ] + (["log_sum = tl.log(row_sum)"] if statistics == "log_softmax" else [])
        if statistics == "mean_variance":
            return [
                "# padding lanes are zeroed, so they add nothing to the sums",
                f"mean = tl.sum(tl.where(mask, {x}, 0.0), axis=1) / row_length",
                f"centered = tl.where(mask, {x} - mean[:, None], 0.0)",
                "# the biased variance (divided by the row length), as PyTorch normalises",
                "variance = tl.sum(centered * centered, axis=1) / row_length",
                f"rstd = tl.rsqrt(variance + {eps!r})",
            ]
        if statistics == "mean_square":
            return [
                "# padding lanes are zeroed, so they add nothing to the sum",
                f"mean_square = tl.sum(tl.where(mask, {x} * {x}, 0.0), axis=1) / row_length",
                f"rstd = tl.rsqrt(mean_square + {eps!r})",
            ]
        return []

    def _loop_statistics(self) -> list[str]:
        """The first pass over the rows in chunks: per-lane accumulators, merged into row statistics after it."""
        x, statistics, eps = self.source_variable, self.norm.statistics, self.norm.eps
        zeros = "tl.zeros([ROWS, BLOCK], dtype=tl.float32)"
        if statistics in ("softmax", "log_softmax"):
            initial = ['running_max = tl.full([ROWS, BLOCK], float("-inf"), tl.float32)', f"running_sum = {zeros}"]
            update = [
                f'row_values = tl.where(mask, {x}, float("-inf"))',
                "# a NaN must stay in the max, or a lane could drop it from its sum below",
                "new_max = tl.maximum(running_max, row_values, propagate_nan=tl.PropagateNan.ALL)",
                "# rescale each lane's sum to its new max; a lane that has seen only -inf keeps a zero sum",
                "# (exp(-inf - -inf) would be NaN)",
                "running_sum = tl.where(",
                f'{INDENT}new_max == float("-inf"),',
                f"{INDENT}0.0,",
                f"{INDENT}running_sum * tl.exp(running_max - new_max) + tl.exp(row_values - new_max),",
                ")",
                "running_max = new_max",
            ]
            merge = [
                "# merge the lanes: every lane's sum rescaled to the row's max",
                "row_max = tl.max(running_max, axis=1)",
                "row_sum = tl.sum(running_sum * tl.exp(running_max - row_max[:, None]), axis=1)",
            ] + (["log_sum = tl.log(row_sum)"] if statistics == "log_softmax" else [])
        elif statistics == "mean_variance":
            initial = [f"lane_count = {zeros}", f"lane_mean = {zeros}", f"lane_m2 = {zeros}"]
            update = [
                "# Welford's update per lane: stable even when the mean is large against the spread",
                "lane_count = lane_count + tl.where(mask, 1.0, 0.0)",
                f"delta = tl.where(mask, {x} - lane_mean, 0.0)",
                "lane_mean = lane_mean + delta / tl.maximum(lane_count, 1.0)",
                f"lane_m2 = lane_m2 + tl.where(mask, delta * ({x} - lane_mean), 0.0)",
            ]
            merge = [
                "# merge the lanes (Chan et al.): the row's mean, then every lane's spread around it",
                "mean = tl.sum(lane_mean * lane_count, axis=1) / row_length",
                "lane_offset = lane_mean - mean[:, None]",
                "# the biased variance (divided by the row length), as PyTorch normalises",
                "variance = tl.sum(lane_m2 + lane_count * lane_offset * lane_offset, axis=1) / row_length",
                f"rstd = tl.rsqrt(variance + {eps!r})",
            ]
        else:
            initial = [f"lane_squares = {zeros}"]
            update = [f"lane_squares = lane_squares + tl.where(mask, {x} * {x}, 0.0)"]
            merge = [f"rstd = tl.rsqrt(tl.sum(lane_squares, axis=1) / row_length + {eps!r})"]
        loop = self._chunk_lines(with_channels=False) + self._input_lines() + update
        lines = ["# first pass: per-lane statistics over the rows' chunks"] + initial
        lines.append("for column_start in range(0, row_length, BLOCK):")
        return lines + [INDENT + line for line in loop] + merge

    def _result_lines(self) -> list[str]:
        """Load what the affine step and the epilogue read, compute the op's value and the epilogue, store."""
        lines = self.output_reads.load_lines(self.index_of_dim, "mask", flat_offsets="offsets", narrow_mask=self.row_mask)
        lines += self._anchor_lines() + self.epilogue_lines
        for value in self.plan.outputs:
            dtype = self.graph.spec_of(value).dtype
            variable = stored(self.variables[value], dtype)
            lines.append(f"tl.store({self.output_pointers[value]} + offsets, {variable}, mask=mask)")
        return lines

    def _anchor_lines(self) -> list[str]:
        """The op's value from the row statistics (or the running statistics), with weight and bias."""
        x, statistics, single = self.source_variable, self.norm.statistics, self.chunk is None
        lines: list[str] = []
        if statistics == "softmax":
            if not single:
                lines.append(f"numerator = tl.exp({x} - row_max[:, None])")
            normalized = "numerator / row_sum[:, None]"
        elif statistics == "log_softmax":
            normalized = "shifted - log_sum[:, None]" if single else f"{x} - row_max[:, None] - log_sum[:, None]"
        elif statistics == "mean_variance":
            normalized = "centered * rstd[:, None]" if single else f"({x} - mean[:, None]) * rstd[:, None]"
        elif statistics == "mean_square":
            normalized = f"{x} * rstd[:, None]"
        else:
            normalized = f"({x} - {self.channel_variables['mean']}) * {self.channel_scale}"
        norm = self.norm
        if norm.per_channel:
            # with running statistics the weight is already in the channel's scale
            weight = self.channel_variables.get("weight") if statistics is not None else None
            bias = self.channel_variables.get("bias")
        else:
            weight = self.variables[norm.weight] if norm.weight else None
            bias = self.variables[norm.bias] if norm.bias else None
        expression = normalized + (f" * {weight}" if weight else "") + (f" + {bias}" if bias else "")
        return lines + [f"{self.variables[self.plan.anchor]} = {expression}"]

    # ----- wrapper -------------------------------------------------------------------------------

    def wrapper_source(self, channels_last_wrapper: str | None = None) -> str:
        """The launch wrapper; channels_last_wrapper: where a channels-last input is handed instead."""
        plan, graph, norm, layout = self.plan, self.graph, self.norm, self.layout
        scope = self.context.scope()
        parameters = {value: scope.fresh(value) for value in plan.inputs}
        tensors = {value: name for value, name in parameters.items() if _is_tensor(graph, value)}
        outputs = {value: scope.fresh(value) for value in plan.outputs}
        names = ("domain_shape", "row_length", "n_rows", "inner_size", "ROWS", "BLOCK", "grid")
        domain_shape, row_length, n_rows, inner_size, rows, block, grid = (scope.fresh(name) for name in names)
        sizes = _SizeExpressions(norm, domain_shape)
        input_reads = self.input_reads.reads
        full_shape = [read for read in input_reads if tuple(read.spec.shape) == norm.domain]

        returned = ", ".join(outputs.values())
        lines = [
            f"def {plan.wrapper}({', '.join(parameters.values())}):",
            f'{INDENT}"""Computes {", ".join(plan.nodes)} in one launch of {plan.kernel}; returns {returned}."""',
        ]
        setup = self.input_reads.setup_lines(parameters, scope, self.context.helpers)
        setup += self.output_reads.setup_lines(parameters, scope, self.context.helpers)
        device = f"{self.input_reads.pointer_arguments(tensors)[0]}.device"
        reshaping = self.input_reads.reshape_inputs() | self.output_reads.reshape_inputs()
        unused = [name for value, name in parameters.items() if value not in tensors and value not in reshaping]
        if unused:
            lines.append(f"{INDENT}# {', '.join(unused)}: sizes the op was given; the input's shape holds them")
        if channels_last_wrapper is not None:
            source = tensors[norm.source]
            lines += [
                f"{INDENT}if not {source}.is_contiguous() and {source}.is_contiguous(memory_format=torch.channels_last):",
                f"{INDENT * 2}return {channels_last_wrapper}({', '.join(parameters.values())})",
            ]
        lines += [INDENT + line for line in setup]
        if full_shape:
            lines.append(f"{INDENT}{domain_shape} = {self.input_reads.shape_of(full_shape[0], tensors)}")
        else:
            shapes = ", ".join(self.input_reads.shape_of(read, tensors) for read in input_reads)
            lines.append(f"{INDENT}{domain_shape} = torch.broadcast_shapes({shapes})")
        for value, variable in outputs.items():
            dtype = graph.spec_of(value).dtype
            lines.append(f"{INDENT}{variable} = torch.empty({domain_shape}, dtype=torch.{dtype}, device={device})")
        lines += [
            f"{INDENT}# rows of the elements normalised together, one row per index of the other dims",
            f"{INDENT}{row_length} = {sizes.product(layout.column_dims)}",
            f"{INDENT}{n_rows} = {sizes.product(layout.row_dims)}",
        ]
        if layout.rows_interleave:
            inner_dims = [dim for dim in layout.row_dims if dim > max(layout.column_dims)]
            lines.append(f"{INDENT}{inner_size} = {sizes.product(inner_dims)}")
        stride_arguments: list[str] = []
        flag_arguments: list[str] = []
        for reads in (self.input_reads, self.output_reads):
            stride_lines, strides, flags = reads.wrapper_arguments(tensors, scope)
            lines += [INDENT + line for line in stride_lines]
            stride_arguments += strides
            flag_arguments += flags
        stride_arguments += [f"{tensors[self.channels[role]]}.stride(0)" for role in self.channel_strides]
        lines.append(f"{INDENT}{rows} = {plan.params['rows']}")
        lines += [INDENT + line for line in self._block_lines(block, row_length, sizes)]
        lines += [
            f"{INDENT}# one program per {rows} rows",
            f"{INDENT}{grid} = (triton.cdiv({n_rows}, {rows}),)",
            f"{INDENT}{plan.kernel}[{grid}](",
        ]
        size_arguments = [n_rows, row_length]
        if layout.rows_interleave:
            size_arguments.append(inner_size)
        if self.uses_channels_per_group:
            size_arguments.append(sizes.virtual(2))
        arguments = (
            self.input_reads.pointer_arguments(tensors)
            + self.output_reads.pointer_arguments(tensors)
            + [tensors[value] for value in self.channels.values()]
            + list(outputs.values())
            + size_arguments
            + [sizes.virtual(dim) for dim in list(self.row_sizes) + list(self.column_sizes)]
            + stride_arguments
            + flag_arguments
            + [f"ROWS={rows}", f"BLOCK={block}", f"num_warps={plan.params['warps']}"]
        )
        lines += [f"{INDENT * 2}{argument}," for argument in arguments]
        lines += [f"{INDENT})", f"{INDENT}return {returned}"]
        return "\n".join(lines) + "\n"

    def _block_lines(self, block: str, row_length: str, sizes: "_SizeExpressions") -> list[str]:
        if self.chunk is not None:
            return ["# columns per loop step", f"{block} = {self.chunk}"]
        static_length = sizes.static_product(self.layout.column_dims)
        if static_length is not None:
            padded = next_power_of_two(static_length)
            return [f"# whole rows: {static_length} columns, padded to a power of two", f"{block} = {padded}"]
        return ["# whole rows, padded to a power of two", f"{block} = triton.next_power_of_2({row_length})"]


class _SizeExpressions:
    """Wrapper expressions for the sizes of a row layout's virtual dims: literals where the graph fixes them."""

    def __init__(self, normalization: Normalization, domain_shape: str):
        self.layout = normalization.layout
        self.domain = normalization.domain
        self.domain_shape = domain_shape

    def real(self, dim: int) -> str:
        size = self.domain[dim]
        return str(size) if isinstance(size, int) else f"{self.domain_shape}[{dim}]"

    def virtual(self, dim: int) -> str:
        groups = self.layout.groups
        if groups is None or dim == 0:
            return self.real(dim)
        if dim == 1:
            return str(groups)
        if dim == 2:
            per_group = self.layout.virtual_shape[2]
            return str(per_group) if isinstance(per_group, int) else f"{self.real(1)} // {groups}"
        return self.real(dim - 1)

    def static_product(self, dims: Sequence[int]) -> int | None:
        sizes = [self.layout.virtual_shape[dim] for dim in dims]
        return math.prod(sizes) if all(isinstance(size, int) for size in sizes) else None

    def product(self, dims: Sequence[int]) -> str:
        """The product of the dims' sizes, static ones folded into one literal."""
        static = math.prod(size for size in (self.layout.virtual_shape[dim] for dim in dims) if isinstance(size, int))
        symbolic = [self.virtual(dim) for dim in dims if not isinstance(self.layout.virtual_shape[dim], int)]
        if self.layout.groups is not None:
            # channels per group of a symbolic channel count is an expression, not a name: parenthesise
            symbolic = [f"({term})" if "//" in term else term for term in symbolic]
        terms = symbolic + ([str(static)] if static != 1 or not symbolic else [])
        return " * ".join(terms)
