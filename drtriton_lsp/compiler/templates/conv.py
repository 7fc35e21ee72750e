"""The conv template: conv1d and conv2d as one Triton kernel with a pointwise epilogue: an implicit GEMM (groups=1), or
per-channel multiply-adds for a depthwise convolution (groups = input channels), where cuDNN is weakest.

Output pixels are the tile's rows and output channels its columns; each input tile is gathered through the input's strides.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass
from typing import Any

from drtriton_lsp.compiler.elementwise import FUSIBLE_DTYPES, bind_arguments
from drtriton_lsp.compiler.graph import OpGraph, OpNode
from drtriton_lsp.compiler.templates.base import (
    AnchorShape,
    KernelPlan,
    RenderContext,
    Template,
    example_extent,
    example_size,
    graph_ref,
    int_per_dim,
    power_of_two,
    power_of_two_within,
    tile,
    whole_number,
)
from drtriton_lsp.compiler.templates.gemm import (
    GEMM_DOCSTRING_WIDTH,
    PRECISION,
    dot_lines,
    products_text,
    tile_epilogue_lines,
)
from drtriton_lsp.compiler.templates.pointwise import INDENT, DomainReads, domain_text, stored
from drtriton_lsp.compiler.templates.writer import H200_STREAMING_MULTIPROCESSORS

# overload -> spatial dims it convolves (None: aten.convolution, whose weight's rank says)
CONV_OVERLOADS = {
    "aten.conv1d.default": 1,
    "aten.conv1d.padding": 1,
    "aten.conv2d.default": 2,
    "aten.conv2d.padding": 2,
    "aten.convolution.default": None,
}
# the letters that name each spatial dim in the kernel (out_h, WINDOW_W, ...)
SPATIAL_AXES = {1: ("l",), 2: ("h", "w")}


class NotComputed(Exception):
    """A convolution this template does not compute; the message says why."""


@dataclass(frozen=True)
class ConvForm:
    """A convolution as the kernel computes it, per spatial dim d:
    out[b, o, p] = bias[o] + sum over c, q of input[b, c, p * stride - padding_before + q * dilation] * weight[o, c, q].

    window: the weight's spatial sizes (fixed in the graph). padding_before / padding_after: zeros on each
    side of each spatial dim (they differ for padding='same' with an even window, as in PyTorch).
    multiplier: 0 for a dense convolution (groups=1); for a depthwise one (groups = input channels), the output
    channels per input channel: output channel o then reads input channel o // multiplier alone (c above).
    """

    input: str
    weight: str
    bias: str | None
    window: tuple[int, ...]
    stride: tuple[int, ...]
    padding_before: tuple[int, ...]
    padding_after: tuple[int, ...]
    dilation: tuple[int, ...]
    multiplier: int = 0

    @property
    def spatial(self) -> int:
        return len(self.window)


def conv_form(node: OpNode, graph: OpGraph) -> ConvForm | None:
    """The op as a convolution this template computes exactly as PyTorch does, else None."""
    try:
        return read_conv(node, graph)
    except NotComputed:
        return None


def read_conv(node: OpNode, graph: OpGraph) -> ConvForm:
    """The op as a convolution; raises NotComputed saying why this template does not compute it."""
    if node.op not in CONV_OVERLOADS:
        raise NotComputed("the conv template computes non-transposed 1-d and 2-d convolutions, dense or depthwise")
    bound = bind_arguments(node)
    source, weight, bias = graph_ref(bound["input"]), graph_ref(bound["weight"]), graph_ref(bound["bias"])
    source_spec = graph.spec_of(source) if source else None
    weight_spec = graph.spec_of(weight) if weight else None
    bias_spec = graph.spec_of(bias) if bias else None
    if source_spec is None or weight_spec is None or (bound["bias"] is not None and bias_spec is None):
        raise NotComputed("input, weight and bias must be tensors")
    if bound.get("transposed"):
        raise NotComputed("a transposed convolution")
    spatial = CONV_OVERLOADS[node.op] or weight_spec.rank - 2
    if spatial not in SPATIAL_AXES:
        raise NotComputed(f"{spatial} spatial dims; only 1-d and 2-d convolutions")
    if source_spec.rank != spatial + 2 or weight_spec.rank != spatial + 2:
        raise NotComputed(f"an input of rank {source_spec.rank}; the input must be [batch, channels, {spatial} spatial dims]")
    groups, channels, out_channels = bound["groups"], source_spec.shape[1], weight_spec.shape[0]
    multiplier = 0
    if groups != 1:
        depthwise = (
            isinstance(channels, int) and groups == channels and weight_spec.shape[1] == 1
            and isinstance(out_channels, int) and out_channels % groups == 0
        )
        if not depthwise:
            raise NotComputed(
                f"groups={groups}; of the grouped convolutions only depthwise ones (groups = input channels) are computed"
            )
        multiplier = out_channels // groups
    elif weight_spec.shape[1] != channels:
        raise NotComputed("the weight's input channels differ from the input's")
    window = weight_spec.shape[2:]
    if not all(isinstance(size, int) and size > 0 for size in window):
        raise NotComputed("the weight's window size must be fixed")
    specs = [spec for spec in (source_spec, weight_spec, bias_spec, node.spec) if spec is not None]
    if node.spec.dtype not in FUSIBLE_DTYPES or any(spec.dtype != node.spec.dtype for spec in specs):
        raise NotComputed("input, weight, bias and output must share one dtype: float32, float16 or bfloat16")
    if any(size == 0 for spec in specs for size in spec.shape):
        raise NotComputed("an empty dim")
    if bias_spec is not None and bias_spec.shape != (weight_spec.shape[0],):
        raise NotComputed("the bias must be a [out_channels] tensor")
    stride, dilation = int_per_dim(bound["stride"], spatial), int_per_dim(bound["dilation"], spatial)
    if stride is None or dilation is None or min(stride + dilation) < 1:
        raise NotComputed("stride and dilation must be positive ints")
    padding = bound["padding"]
    if padding == "valid":
        before = after = (0,) * spatial
    elif padding == "same":
        if stride != (1,) * spatial:
            raise NotComputed("padding='same' with a stride (PyTorch rejects it)")
        # PyTorch pads dilation * (window - 1) in all, the odd one on the far side
        total = tuple(step * (size - 1) for step, size in zip(dilation, window))
        before = tuple(amount // 2 for amount in total)
        after = tuple(amount - half for amount, half in zip(total, before))
    else:
        before = after = int_per_dim(padding, spatial)
        if before is None or min(before) < 0:
            raise NotComputed("padding must be ints of at least 0, 'valid' or 'same'")
    return ConvForm(source, weight, bias, window, stride, before, after, dilation, multiplier)


class ConvTemplate(Template):
    """Implicit-GEMM (and depthwise) convolutions with a pointwise epilogue on each output tile.

    Kept in PyTorch by default: cuDNN usually wins, so only a script line or a search that measured
    this kernel faster (typically where the epilogue saves a pass over the output) chooses it.
    """

    name = "conv"
    summary = "conv1d and conv2d (dense or depthwise), with pointwise epilogues; kept in PyTorch unless a script or a search picks it"
    parameters = (
        tile(
            "tile",
            ("M", "N", "K"),
            16,
            256,
            "output pixels x output channels per program, and the input channels per step (K slice)",
        ),
        power_of_two("warps", 1, 16, "warps per program"),
        whole_number("stages", 1, 6, "K slices in flight on the GPU (software pipelining depth)"),
        PRECISION,
    )

    def kept_by_default(self, node: OpNode, graph: OpGraph) -> bool:
        return True

    def anchor(self, node: OpNode, graph: OpGraph) -> AnchorShape | None:
        form = conv_form(node, graph)
        if form is None:
            return None
        # no prologue: every input element is gathered into several patches, so it is read, not computed
        return AnchorShape(None, tuple(graph.spec_of(form.input).shape), tuple(node.spec.shape))

    def unsupported_reason(self, node: OpNode, graph: OpGraph) -> str:
        try:
            read_conv(node, graph)
        except NotComputed as why:
            return str(why)
        return ""

    def default_parameters(self, plan: KernelPlan, graph: OpGraph) -> dict[str, Any]:
        node = next(node for node in graph.nodes if node.name == plan.anchor)
        out_shape = node.spec.shape
        rows = example_size(out_shape[0], graph) * example_extent(out_shape[2:], graph)
        columns = example_size(out_shape[1], graph)
        form = conv_form(node, graph)
        if form.multiplier:
            # no channel reduction: a tile of pixels (contiguous in the input) by a few channels, one multiply-add
            # per window position; the K slice is unused
            tile_sizes = (power_of_two_within(rows, 16, 128), power_of_two_within(columns, 16, 32), 16)
            return {"tile": tile_sizes, "warps": 4, "stages": 2, "precision": "ieee"}
        channels = example_size(graph.spec_of(form.input).shape[1], graph)
        half = node.spec.dtype != "float32"
        # a K slice is input channels at one window position: wider than the channels only adds zeros
        depth = power_of_two_within(channels, 16, 64 if half else 32)
        if math.ceil(rows / 128) * math.ceil(columns / 128) >= H200_STREAMING_MULTIPROCESSORS:
            # a full wave of large tiles: for float16/bfloat16 PyTorch Inductor's 128x128 conv config with
            # 8 warps; float32 (no tensor cores when exact) the matmul template's 128x64 tile with 4 warps
            tile_sizes, warps = ((128, 128, depth), 8) if half else ((128, 64, depth), 4)
        else:
            # less than a wave: tiles no larger than the problem spread it over more SMs
            tile_sizes = (power_of_two_within(rows, 16, 64), power_of_two_within(columns, 16, 64), depth)
            warps = 4
        return {"tile": tile_sizes, "warps": warps, "stages": 2, "precision": "ieee"}

    def search_parameters(self, defaults: dict[str, Any]) -> list[dict[str, Any]]:
        """Each tile size halved and doubled, then warps halved and doubled, stages one less and one
        more, and the other precision (the base class would only move the K slice of the tile)."""
        variants: list[dict[str, Any]] = []
        for axis in range(3):
            for factor in (0.5, 2):
                sizes = list(defaults["tile"])
                sizes[axis] = int(sizes[axis] * factor)
                if 16 <= sizes[axis] <= 256:
                    variants.append({**defaults, "tile": tuple(sizes)})
        warps, stages = defaults["warps"], defaults["stages"]
        variants += [{**defaults, "warps": count} for count in (warps // 2, warps * 2) if 1 <= count <= 16]
        variants += [{**defaults, "stages": depth} for depth in (stages - 1, stages + 1) if 1 <= depth <= 6]
        other = "tf32" if defaults["precision"] == "ieee" else "ieee"
        return variants + [{**defaults, "precision": other}]

    def parameter_problem(self, plan: KernelPlan, graph: OpGraph) -> str:
        node = next(node for node in graph.nodes if node.name == plan.anchor)
        if plan.params.get("precision") == "tf32" and conv_form(node, graph).multiplier:
            return "precision=tf32: a depthwise convolution multiplies in float32 without tl.dot, nothing to compute in TF32"
        return ""

    def render(self, plan: KernelPlan, context: RenderContext) -> str:
        node = next(node for node in context.graph.nodes if node.name == plan.anchor)
        return ConvKernel(plan, context, node, conv_form(node, context.graph)).source()


class ConvKernel:
    """Renders one conv plan: the `@triton.jit` kernel, then its launch wrapper.

    The output [batch, out_channels, spatial...] is the GEMM [M, N] = [M, K] x [K, N] with M = batch x output
    pixels (row m is pixel m of the contiguous output), N = output channels and K = window positions x input
    channels. The kernel's names are all taken in one scope, so its body and the wrapper's launch agree on them.
    """

    def __init__(self, plan: KernelPlan, context: RenderContext, node: OpNode, form: ConvForm):
        self.plan, self.context, self.form = plan, context, form
        self.graph = context.graph
        self.dtype = node.spec.dtype
        self.axes = SPATIAL_AXES[form.spatial]
        nodes = {member.name: member for member in self.graph.nodes}
        epilogue_reads = {ref for member in plan.epilogue for ref in nodes[member].input_refs()}

        scope = self.scope = context.scope()
        fixed = [
            "pid", "tiles_n", "tile_m", "tile_n", "rows", "cols", "ks", "pixels", "batch", "pixel",
            "window_starts", "window_offset", "channel_blocks", "step", "position", "channels", "inside", "acc", "mask",
            "out_offsets", "M", "N", "C_IN", "BLOCK_M", "BLOCK_N", "BLOCK_K", "WIDEN_BFLOAT16",
        ]  # fmt: skip
        for axis in self.axes:
            fixed += [f"out_{axis}", f"in_{axis}", f"in_{axis}_start", f"window_{axis}"]
            fixed += [f"{size}_{axis.upper()}" for size in ("IN", "OUT", "WINDOW", "STRIDE", "PAD", "DILATION")]
        for name in fixed:
            scope.fresh(name)
        self.input, self.weight = scope.fresh(form.input), scope.fresh(form.weight)
        self.input_pointer, self.weight_pointer = scope.fresh(f"{self.input}_ptr"), scope.fresh(f"{self.weight}_ptr")
        self.input_strides = [scope.fresh(f"{self.input}_stride_{dim}") for dim in ("batch", "channel", *self.axes)]
        self.weight_strides = [scope.fresh(f"{self.weight}_stride_{dim}") for dim in ("out", "in", *self.axes)]
        self.bias = scope.fresh(form.bias) if form.bias else None
        self.bias_pointer = scope.fresh(f"{self.bias}_ptr") if self.bias else None
        self.bias_stride = scope.fresh(f"{self.bias}_stride") if self.bias else None
        self.variables: dict[str, str] = {}
        # values the epilogue reads from memory, in the output's shape
        domain_values = [value for value in plan.inputs if value in epilogue_reads]
        self.reads = DomainReads(self.graph, plan.domain, domain_values, scope, self.variables, flat_fast_path=True)
        self.output_pointers = {value: scope.fresh(f"{value}_ptr") for value in plan.outputs}

    def source(self) -> str:
        return self._kernel() + "\n\n" + self._wrapper()

    # -- kernel ----------------------------------------------------------------------------------

    def _kernel(self) -> str:
        plan = self.plan
        body = self._tile_lines() + self._loop_lines()
        expression = "acc"
        if self.bias:
            body += [
                "# the bias of each output channel, added to every pixel",
                f"{self.bias} = tl.load({self.bias_pointer} + cols * {self.bias_stride}, mask=cols < N, other=0.0)"
                + ("" if self.dtype == "float32" else ".to(tl.float32)"),
            ]
            expression = f"acc + {self.bias}[None, :]"
        body += [
            "mask = (rows < M)[:, None] & (cols < N)[None, :]",
            "# the output is a new contiguous tensor: channel-major planes of pixels for each batch entry",
            "out_offsets = (batch[:, None] * N + cols[None, :]) * pixels + pixel[:, None]",
        ]
        index_of_dim = {0: "batch[:, None]", 1: "cols[None, :]"}
        index_of_dim |= {2 + position: f"out_{axis}[:, None]" for position, axis in enumerate(self.axes)}
        body += self.reads.load_lines(index_of_dim, "mask", flat_offsets="out_offsets")
        body += tile_epilogue_lines(plan, expression, self.dtype, self.variables, self.scope, self.context)
        for value in plan.outputs:
            stored_value = stored(self.variables[value], self.graph.spec_of(value).dtype)
            body.append(f"tl.store({self.output_pointers[value]} + out_offsets, {stored_value}, mask=mask)")

        per_axis = [f"{size}_{axis.upper()}" for size in ("IN", "OUT") for axis in self.axes]
        constants = [f"{size}_{axis.upper()}" for size in ("WINDOW", "STRIDE", "PAD", "DILATION") for axis in self.axes]
        parameters = (
            [self.input_pointer, self.weight_pointer]
            + ([self.bias_pointer] if self.bias else [])
            + self.reads.pointer_parameters()
            + list(self.output_pointers.values())
            + ["M", "N", "C_IN"]
            + per_axis
            + self.input_strides
            + self.weight_strides
            + ([self.bias_stride] if self.bias else [])
            + self.reads.stride_parameters()
            + self.reads.flag_parameters()
            + [f"{name}: tl.constexpr" for name in constants]
            + ["BLOCK_M: tl.constexpr", "BLOCK_N: tl.constexpr", "BLOCK_K: tl.constexpr"]
            + (["WIDEN_BFLOAT16: tl.constexpr"] if self.dtype == "bfloat16" else [])
        )
        lines = ["@triton.jit", f"def {plan.kernel}("]
        lines += [f"{INDENT}{parameter}," for parameter in parameters]
        lines += ["):"] + [f"{INDENT}{line}" if line else "" for line in self._docstring()]
        lines += [f"{INDENT}{line}" for line in body]
        return "\n".join(lines) + "\n"

    def _docstring(self) -> list[str]:
        replaced = ", ".join(f"{op} ({node})" for node, op in zip(self.plan.nodes, self.plan.ops))
        products = products_text(self.dtype, self.plan.params["precision"])
        window = "x".join(str(size) for size in self.form.window)
        if self.form.multiplier:
            return self._depthwise_docstring(replaced, window)
        finishes = [step for step, present in (("adds the bias", self.bias), ("computes the epilogue", self.plan.epilogue)) if present]
        tail = ", ".join(finishes) + " in float32 and stores the tile" if finishes else "stores the tile"
        description = (
            f"Output {domain_text(self.plan.domain)} as an implicit GEMM [M, N] = [M, K] x [K, N]: M = batch x output "
            f"pixels, N = output channels, K = {window} window positions x input channels. Each program computes one "
            f"BLOCK_M x BLOCK_N output tile: for each window position it gathers BLOCK_K input channels of every "
            f"pixel's patch straight from the input (through its strides; padding reads 0), multiplies them with the "
            f"weight's slice by tl.dot ({products}, float32 accumulation), then {tail}."
        )
        return [f'"""Replaces {replaced}.', ""] + textwrap.wrap(description, GEMM_DOCSTRING_WIDTH) + ['"""']

    def _depthwise_docstring(self, replaced: str, window: str) -> list[str]:
        source_channel = "c" if self.form.multiplier == 1 else f"c // {self.form.multiplier}"
        finishes = [step for step, present in (("adds the bias", self.bias), ("computes the epilogue", self.plan.epilogue)) if present]
        description = (
            f"Depthwise convolution: output {domain_text(self.plan.domain)}, each output channel c the {window} window "
            f"of input channel {source_channel} alone. Each program computes one BLOCK_M pixels x BLOCK_N channels "
            f"tile: for each window position it gathers the pixels' inputs straight from the input (through its "
            f"strides; padding reads 0) and multiply-adds them with each channel's weight in float32"
            + (", then " + ", ".join(finishes) if finishes else "")
            + ", and stores the tile."
        )
        return [f'"""Replaces {replaced}.', ""] + textwrap.wrap(description, GEMM_DOCSTRING_WIDTH) + ['"""']

    def _tile_lines(self) -> list[str]:
        axes = self.axes
        lines = [
            "pid = tl.program_id(0)",
            "tiles_n = tl.cdiv(N, BLOCK_N)",
            "# neighbouring programs share a row tile: its gathered input patches come from L2, and the weight is",
            "# small enough to stay there",
            "tile_m = pid // tiles_n",
            "tile_n = pid % tiles_n",
            "# int64: indices times strides may pass 2**31",
            "rows = tile_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)",
            "cols = tile_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)",
            "ks = tl.arange(0, BLOCK_K).to(tl.int64)",
            f"# each row is one output pixel: its batch entry and its position ({', '.join(f'out_{a}' for a in axes)})",
            f"pixels = {' * '.join(f'OUT_{axis.upper()}' for axis in axes)}",
            "batch = rows // pixels",
            "pixel = rows % pixels",
        ]
        lines += _split_lines("pixel", [f"out_{axis}" for axis in axes], [f"OUT_{axis.upper()}" for axis in axes])
        lines.append("# where each pixel's window starts in the input (negative inside the leading padding)")
        lines += [f"in_{axis}_start = out_{axis} * STRIDE_{axis.upper()} - PAD_{axis.upper()}" for axis in axes]
        batch_stride, _, *spatial_strides = self.input_strides
        starts = [f"batch * {batch_stride}"] + [f"in_{axis}_start * {stride}" for axis, stride in zip(axes, spatial_strides)]
        return lines + [f"window_starts = {' + '.join(starts)}"]

    def _loop_lines(self) -> list[str]:
        """The K loop: window positions outermost, BLOCK_K input channels per step, accumulated by tl.dot."""
        scope, form, axes = self.scope, self.form, self.axes
        input_tile, weight_tile = scope.fresh(f"{self.input}_tile"), scope.fresh(f"{self.weight}_tile")
        weight_columns = scope.fresh(f"{self.weight}_col_ptrs")
        _, channel_stride, *spatial_strides = self.input_strides
        out_stride, in_stride, *window_strides = self.weight_strides
        # a window lies inside the input on a side without padding: only padded sides are checked
        padded = [
            position for position in range(form.spatial) if form.padding_before[position] or form.padding_after[position]
        ]
        bounds = ["(rows < M)"]
        for position in padded:
            axis = axes[position]
            if form.padding_before[position]:
                bounds.append(f"(in_{axis} >= 0)")
            if form.padding_after[position]:
                bounds.append(f"(in_{axis} < IN_{axis.upper()})")
        window_offset = " + ".join(
            f"window_{axis} * DILATION_{axis.upper()} * {stride}" for axis, stride in zip(axes, spatial_strides)
        )
        weight_offset = " + ".join(f"window_{axis} * {stride}" for axis, stride in zip(axes, window_strides))
        if form.multiplier:
            return self._depthwise_loop_lines(input_tile, weight_tile, weight_columns, padded, bounds, window_offset,
                                              weight_offset)
        lines = [
            f"{weight_columns} = {self.weight_pointer} + cols * {out_stride}",
            "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
            "# K runs over window positions, BLOCK_K input channels at a time: a step's spatial bounds are one",
            "# check per pixel, and its channels one stride apart",
            "channel_blocks = tl.cdiv(C_IN, BLOCK_K)",
            f"for step in range(0, {' * '.join(f'WINDOW_{axis.upper()}' for axis in axes)} * channel_blocks):",
            f"{INDENT}position = step // channel_blocks",
            f"{INDENT}channels = (step % channel_blocks) * BLOCK_K + ks",
        ]
        lines += self._window_position_lines(padded, bounds, window_offset)
        lines += [
            f"{INDENT}{input_tile} = tl.load(",
            f"{INDENT * 2}{self.input_pointer} + (window_starts + window_offset)[:, None] + channels[None, :] * {channel_stride},",
            f"{INDENT * 2}mask=inside[:, None] & (channels < C_IN)[None, :],",
            f"{INDENT * 2}other=0.0,",
            f"{INDENT})",
            f"{INDENT}{weight_tile} = tl.load(",
            f"{INDENT * 2}{weight_columns}[None, :] + channels[:, None] * {in_stride} + {weight_offset},",
            f"{INDENT * 2}mask=(channels < C_IN)[:, None] & (cols < N)[None, :],",
            f"{INDENT * 2}other=0.0,",
            f"{INDENT})",
        ]
        dot = dot_lines(input_tile, weight_tile, self.dtype, self.plan.params["precision"])
        return lines + [INDENT + line for line in dot]

    def _window_position_lines(self, padded: list[int], bounds: list[str], window_offset: str) -> list[str]:
        """The loop body's start, per window position: its indices, the input positions on padded sides, which
        pixels read inside the input, and the position's offset from every pixel's window start."""
        axes = self.axes
        lines = [
            INDENT + line
            for line in _split_lines("position", [f"window_{axis}" for axis in axes], [f"WINDOW_{axis.upper()}" for axis in axes])
        ]
        lines += [
            f"{INDENT}in_{axes[position]} = in_{axes[position]}_start + window_{axes[position]} * DILATION_{axes[position].upper()}"
            for position in padded
        ]
        return lines + [
            f"{INDENT}# pixels past M{' and window positions in the padding' if padded else ''} read 0, which adds nothing",
            f"{INDENT}inside = {' & '.join(bounds)}",
            f"{INDENT}# the window position's offset from every pixel's window start: one scalar per step",
            f"{INDENT}window_offset = {window_offset}",
        ]

    def _depthwise_loop_lines(
        self, input_tile: str, weight_tile: str, weight_columns: str, padded: list[int], bounds: list[str],
        window_offset: str, weight_offset: str,
    ) -> list[str]:
        """The window loop of a depthwise convolution: each position one multiply-add of the pixels' inputs (of
        each output channel's own input channel) with that channel's weight."""
        form, axes = self.form, self.axes
        _, channel_stride, *_ = self.input_strides
        out_stride, *_ = self.weight_strides
        source_channels = "cols" if form.multiplier == 1 else f"cols // {form.multiplier}"
        lines = [
            f"{weight_columns} = {self.weight_pointer} + cols * {out_stride}",
            "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
            "# each output channel reads its own input channel: no sum over channels, so no tl.dot",
            f"channels = {source_channels}",
            f"for position in range({' * '.join(f'WINDOW_{axis.upper()}' for axis in axes)}):",
        ]
        lines += self._window_position_lines(padded, bounds, window_offset)
        lines += [
            f"{INDENT}{input_tile} = tl.load(",
            f"{INDENT * 2}{self.input_pointer} + (window_starts + window_offset)[:, None] + channels[None, :] * {channel_stride},",
            f"{INDENT * 2}mask=inside[:, None] & (cols < N)[None, :],",
            f"{INDENT * 2}other=0.0,",
            f"{INDENT})",
            f"{INDENT}{weight_tile} = tl.load({weight_columns} + {weight_offset}, mask=cols < N, other=0.0)",
            f"{INDENT}acc += {input_tile}.to(tl.float32) * {weight_tile}.to(tl.float32)[None, :]",
        ]
        return lines

    # -- wrapper ---------------------------------------------------------------------------------

    def _wrapper(self) -> str:
        plan, form, graph = self.plan, self.form, self.graph
        scope = self.context.scope()
        tensors = {value: scope.fresh(value) for value in plan.inputs}
        outputs = {value: scope.fresh(value) for value in plan.outputs}
        source, weight = tensors[form.input], tensors[form.weight]
        in_sizes = [scope.fresh(f"in_{axis}") for axis in self.axes]
        out_sizes = [scope.fresh(f"out_{axis}") for axis in self.axes]
        out_shape, rows, columns, grid = (scope.fresh(name) for name in ("out_shape", "rows", "columns", "grid"))
        source_strides, weight_strides = scope.fresh(f"{source}_strides"), scope.fresh(f"{weight}_strides")
        returned = ", ".join(outputs.values())
        lines = [
            f"def {plan.wrapper}({', '.join(tensors.values())}):",
            f'"""Computes {", ".join(plan.nodes)} in one launch of {plan.kernel}; returns {returned}."""',
            f"{', '.join(in_sizes)}{',' if form.spatial == 1 else ''} = {source}.shape[2:]",
            "# PyTorch's output size: (in + padding - dilation * (window - 1) - 1) // stride + 1",
        ]
        for position, (in_size, out_size) in enumerate(zip(in_sizes, out_sizes)):
            padding = form.padding_before[position] + form.padding_after[position]
            shift = padding - form.dilation[position] * (form.window[position] - 1) - 1
            numerator = in_size if shift == 0 else f"{in_size} {'+' if shift > 0 else '-'} {abs(shift)}"
            lines.append(f"{out_size} = ({numerator}) // {form.stride[position]} + 1")
        lines.append(f"{out_shape} = ({source}.shape[0], {weight}.shape[0], {', '.join(out_sizes)})")
        for value, variable in outputs.items():
            dtype = graph.spec_of(value).dtype
            lines.append(f"{variable} = torch.empty({out_shape}, dtype=torch.{dtype}, device={source}.device)")
        lines += [f"{source_strides} = {source}.stride()", f"{weight_strides} = {weight}.stride()"]
        stride_lines, read_strides, read_flags = self.reads.wrapper_arguments(tensors, scope)
        lines += stride_lines
        block_m, block_n, block_k = plan.params["tile"]
        lines += [
            f"{rows} = {source}.shape[0] * {' * '.join(out_sizes)}",
            f"{columns} = {weight}.shape[0]",
            f"# one program per {block_m} x {block_n} tile of the [pixels, output channels] product",
            f"{grid} = (triton.cdiv({rows}, {block_m}) * triton.cdiv({columns}, {block_n}),)",
        ]
        constants = [
            f"{name}_{axis.upper()}={values[position]}"
            for name, values in (
                ("WINDOW", form.window),
                ("STRIDE", form.stride),
                ("PAD", form.padding_before),
                ("DILATION", form.dilation),
            )
            for position, axis in enumerate(self.axes)
        ]
        arguments = (
            [source, weight]
            + ([tensors[form.bias]] if form.bias else [])
            + [tensors[read.value] for read in self.reads.reads]
            + list(outputs.values())
            + [rows, columns, f"{source}.shape[1]"]
            + in_sizes
            + out_sizes
            + [f"{source_strides}[{dim}]" for dim in range(form.spatial + 2)]
            + [f"{weight_strides}[{dim}]" for dim in range(form.spatial + 2)]
            + ([f"{tensors[form.bias]}.stride(0)"] if form.bias else [])
            + read_strides
            + read_flags
            + constants
            + [f"BLOCK_M={block_m}", f"BLOCK_N={block_n}", f"BLOCK_K={block_k}"]
            + ([f"WIDEN_BFLOAT16={source}.device.type == 'cpu'"] if self.dtype == "bfloat16" else [])
            + [f"num_warps={plan.params['warps']}", f"num_stages={plan.params['stages']}"]
        )
        lines.append(f"{plan.kernel}[{grid}](")
        lines += [f"{INDENT}{argument}," for argument in arguments]
        lines += [")", f"return {returned}"]
        return "\n".join(lines[:1] + [INDENT + line for line in lines[1:]]) + "\n"


def _split_lines(flat: str, indices: list[str], sizes: list[str]) -> list[str]:
    """Statements splitting a row-major flat index over one or two dims of the given sizes."""
    if len(indices) == 1:
        return [f"{indices[0]} = {flat}"]
    outer, inner = indices
    return [f"{outer} = {flat} // {sizes[1]}", f"{inner} = {flat} % {sizes[1]}"]
