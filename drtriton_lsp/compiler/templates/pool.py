"""The pool template: max, average and adaptive pooling over the last 1 to 3 dims, with fused prologue and epilogue.

Each output element reads its window through the input's strides, under PyTorch's padding, ceil-mode and divisor rules.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from drtriton_lsp.compiler.elementwise import FUSIBLE_DTYPES, TRITON_DTYPES, bind_arguments
from drtriton_lsp.compiler.errors import ScheduleError
from drtriton_lsp.compiler.graph import OpGraph, OpNode
from drtriton_lsp.compiler.partition import group_inputs
from drtriton_lsp.compiler.templates.base import (
    AnchorShape,
    KernelPlan,
    RenderContext,
    Template,
    choice,
    example_size,
    int_per_dim,
    next_power_of_two,
    power_of_two,
)
from drtriton_lsp.compiler.templates.pointwise import (
    INDENT,
    DomainReads,
    domain_text,
    elementwise_lines,
    flat_index_lines,
    stored,
)

# op -> (kind, pooled dims, returns indices)
POOL_OVERLOADS: dict[str, tuple[str, int, bool]] = {
    "aten.max_pool1d.default": ("max", 1, False),
    "aten.max_pool2d.default": ("max", 2, False),
    "aten.max_pool3d.default": ("max", 3, False),
    "aten.max_pool1d_with_indices.default": ("max", 1, True),
    "aten.max_pool2d_with_indices.default": ("max", 2, True),
    "aten.max_pool3d_with_indices.default": ("max", 3, True),
    "aten.avg_pool1d.default": ("avg", 1, False),
    "aten.avg_pool2d.default": ("avg", 2, False),
    "aten.avg_pool3d.default": ("avg", 3, False),
    "aten.adaptive_avg_pool1d.default": ("adaptive_avg", 1, False),
    "aten.adaptive_avg_pool2d.default": ("adaptive_avg", 2, False),
    "aten.adaptive_avg_pool3d.default": ("adaptive_avg", 3, False),
    "aten._adaptive_avg_pool2d.default": ("adaptive_avg", 2, False),
    "aten._adaptive_avg_pool3d.default": ("adaptive_avg", 3, False),
    "aten.adaptive_max_pool1d.default": ("adaptive_max", 1, True),
    "aten.adaptive_max_pool2d.default": ("adaptive_max", 2, True),
    "aten.adaptive_max_pool3d.default": ("adaptive_max", 3, True),
}
# the public adaptive_avg_pool ops compute an all-ones output size as a mean (one division by the count)
GLOBAL_MEAN_OPS = (
    "aten.adaptive_avg_pool1d.default",
    "aten.adaptive_avg_pool2d.default",
    "aten.adaptive_avg_pool3d.default",
)
SPATIAL_NAMES = {1: ("length",), 2: ("height", "width"), 3: ("depth", "height", "width")}
# window positions from which the default reads a tile of windows x positions instead of walking each window
TILED_WINDOW_LIMIT = 64
# an int64 index larger than any input position: loses every "first position" minimum
NO_POSITION = "9223372036854775807"
NEGATIVE_INFINITY = 'float("-inf")'

STRATEGY_DOC = (
    "direct: each lane computes one output element, walking its window; "
    "tiled: each step reads a BLOCK x WINDOW tile of output elements by window positions (large windows)"
)
KERNEL_NAMES = (
    "pid", "offsets", "mask", "numel", "inside", "window", "window_offset", "window_size", "takes", "total",
    "divisor", "chunk_nan", "chunk_has_nan", "chunk_max", "chunk_index", "position", "BLOCK", "WINDOW",
    "PLANE_CONTIGUOUS",
)


@dataclass(frozen=True)
class PoolWindow:
    """What one pooling op computes, read from its arguments.

    kind: "max", "avg", "adaptive_max" or "adaptive_avg"; spatial: how many trailing dims are pooled.
    kernel/stride/padding/dilation: per pooled dim (fixed windows only). output_size: adaptive only.
    global_mean: an adaptive average to an all-ones size, which PyTorch computes as a mean.
    """

    kind: str
    source: str
    spatial: int
    with_indices: bool
    kernel: tuple[int, ...] = ()
    stride: tuple[int, ...] = ()
    padding: tuple[int, ...] = ()
    dilation: tuple[int, ...] = ()
    ceil_mode: bool = False
    count_include_pad: bool = True
    divisor_override: int | None = None
    output_size: tuple[int, ...] = ()
    global_mean: bool = False

    @property
    def adaptive(self) -> bool:
        return self.kind.startswith("adaptive")

    @property
    def takes_maximum(self) -> bool:
        return self.kind in ("max", "adaptive_max")

    def reaches_outside(self, dim: int) -> bool:
        """Whether some window of pooled dim `dim` covers positions outside the input (padding, ceil mode)."""
        return not self.adaptive and (self.padding[dim] > 0 or self.ceil_mode)


def pool_window_of(node: OpNode, graph: OpGraph) -> PoolWindow | None:
    """The pooling `node` computes, if this template computes it exactly as PyTorch does; else None."""
    entry = POOL_OVERLOADS.get(node.op)
    if entry is None:
        return None
    kind, spatial, with_indices = entry
    bound = bind_arguments(node)
    source = bound["self"]
    if not (isinstance(source, dict) and "ref" in source):
        return None
    spec = graph.spec_of(source["ref"])
    if spec is None or spec.dtype not in FUSIBLE_DTYPES or spec.rank not in (spatial + 1, spatial + 2):
        return None
    expected_dtypes = [spec.dtype, "int64"] if with_indices else [spec.dtype]
    if [output.dtype for output in node.outputs] != expected_dtypes:
        return None
    output_shape = node.outputs[0].shape
    leading = spec.rank - spatial
    if any(output.shape != output_shape for output in node.outputs) or output_shape[:leading] != spec.shape[:leading]:
        return None
    if kind.startswith("adaptive"):
        output_size = int_per_dim(bound["output_size"], spatial)
        if output_size is None or min(output_size) < 1 or tuple(output_shape[leading:]) != output_size:
            return None
        global_mean = node.op in GLOBAL_MEAN_OPS and set(output_size) == {1}
        return PoolWindow(kind, source["ref"], spatial, with_indices, output_size=output_size, global_mean=global_mean)
    kernel = int_per_dim(bound["kernel_size"], spatial)
    stride = int_per_dim(bound["stride"], spatial) if bound["stride"] not in ({"list": []}, [], None) else kernel
    padding = int_per_dim(bound["padding"], spatial)
    dilation = int_per_dim(bound["dilation"], spatial) if kind == "max" else (1,) * spatial
    if kernel is None or stride is None or padding is None or dilation is None:
        return None
    # PyTorch rejects padding beyond half the kernel; such graphs stay in PyTorch to raise its error
    if min(kernel + stride + dilation) < 1 or any(pad < 0 or 2 * pad > size for pad, size in zip(padding, kernel)):
        return None
    ceil_mode = bound["ceil_mode"]
    count_include_pad = bound.get("count_include_pad", True)
    divisor_override = bound.get("divisor_override")
    if not isinstance(ceil_mode, bool) or not isinstance(count_include_pad, bool):
        return None
    if divisor_override is not None and not (isinstance(divisor_override, int) and divisor_override > 0):
        return None
    return PoolWindow(
        kind, source["ref"], spatial, with_indices, kernel, stride, padding, dilation,
        ceil_mode, count_include_pad, divisor_override,
    )


class PoolTemplate(Template):
    """Pooling windows over the last 1-3 dims: one output element per lane, its window read through strides."""

    name = "pool"
    summary = "max_pool, avg_pool, adaptive_avg_pool, adaptive_max_pool (1d/2d/3d, with indices)"
    parameters = (
        choice("strategy", ("direct", "tiled"), STRATEGY_DOC),
        power_of_two("block", 1, 4096, "output elements each program computes"),
        power_of_two("window", 1, 4096, "window positions per step (strategy tiled)"),
        power_of_two("warps", 1, 16, "warps per program"),
    )

    def anchor(self, node: OpNode, graph: OpGraph) -> AnchorShape | None:
        window = pool_window_of(node, graph)
        if window is None:
            return None
        output_domain = None if window.with_indices else node.outputs[0].shape
        return AnchorShape(window.source, graph.spec_of(window.source).shape, output_domain)

    def default_parameters(self, plan: KernelPlan, graph: OpGraph) -> dict[str, Any]:
        node = next(node for node in graph.nodes if node.name == plan.anchor)
        window = pool_window_of(node, graph)
        if window.adaptive:
            input_shape = graph.spec_of(window.source).shape[-window.spatial:]
            positions = math.prod(
                -(-example_size(size, graph) // output) for size, output in zip(input_shape, window.output_size)
            )
        else:
            positions = math.prod(window.kernel)
        if positions < TILED_WINDOW_LIMIT:
            # small windows: each lane walks its own, and neighbouring lanes read neighbouring inputs
            return {"strategy": "direct", "block": 256, "window": 16, "warps": 4}
        # large windows (global pooling): a tile keeps 4096 loads in flight, contiguous along the window
        width = min(1024, next_power_of_two(positions))
        return {"strategy": "tiled", "block": max(1, 4096 // width), "window": width, "warps": 4}

    def render(self, plan: KernelPlan, context: RenderContext) -> str:
        return PoolKernel(plan, context).render()


class PoolKernel:
    """Source of one pool kernel and its launch wrapper."""

    def __init__(self, plan: KernelPlan, context: RenderContext):
        self.plan = plan
        self.graph = context.graph
        self.context = context
        self.nodes = {node.name: node for node in self.graph.nodes}
        anchor = self.nodes[plan.anchor]
        self.window = pool_window_of(anchor, self.graph)
        self.tiled = plan.params["strategy"] == "tiled"
        self.scope = context.scope()
        # the body spells these names literally; taking them first renames any value called so
        for fixed in KERNEL_NAMES:
            self.scope.fresh(fixed)
        self.input_domain = tuple(self.graph.spec_of(self.window.source).shape)
        self.output_domain = tuple(anchor.outputs[0].shape)
        self.leading = len(self.input_domain) - self.window.spatial
        self.dtype = anchor.outputs[0].dtype
        self.window_values = group_inputs(self.nodes, plan.prologue + (plan.anchor,))
        self.epilogue_values = [value for value in group_inputs(self.nodes, plan.epilogue) if value != plan.anchor]
        for value in self.epilogue_values:
            if value in plan.prologue:
                raise ScheduleError(
                    f"kernel pool: epilogue reads {value}, which the prologue computes per window position",
                    "compute that value in its own kernel",
                )
        names = SPATIAL_NAMES[self.window.spatial]
        self.spatial_names = names
        fresh = self.scope.fresh
        self.input_size = {name: fresh(f"input_{name}") for name in names}
        self.start = {name: fresh(f"{name}_start") for name in names}
        self.end = {name: fresh(f"{name}_end") for name in names} if self.window.adaptive else {}
        self.max_window = {name: fresh(f"max_window_{name}") for name in names} if self.window.adaptive else {}
        self.offset = {name: fresh(f"{name}_offset") for name in names}
        self.position = {name: fresh(f"{name}_position") for name in names}
        self.inside_dim = {name: fresh(f"{name}_inside") for name in names}
        self.first = {name: fresh(f"first_{name}") for name in names} if self.window.with_indices else {}
        self.result = fresh(plan.anchor if not self.window.with_indices else f"{plan.anchor}_values")
        self.argmax = fresh(f"{plan.anchor}_indices") if self.window.with_indices else None

    # --- kernel -------------------------------------------------------------------------------

    def render(self) -> str:
        plan, graph, scope = self.plan, self.graph, self.scope
        window_variables: dict[str, str] = {}
        self.window_reads = DomainReads(
            graph, self.input_domain, self.window_values, scope, window_variables, flat_fast_path=False
        )
        self.window_variables = window_variables
        self.whole_plane = self._reads_whole_planes()
        epilogue_variables: dict[str, str] = {plan.anchor: self.result}
        epilogue_reads = DomainReads(
            graph, self.output_domain, self.epilogue_values, scope, epilogue_variables, flat_fast_path=True
        )
        leading_needed = [dim for dim in self.window_reads.indexed_dims if dim < self.leading]
        spatial_needed = [
            dim for dim in range(self.leading, len(self.output_domain)) if self.output_domain[dim] != 1
        ]
        needed = sorted(set(leading_needed + spatial_needed + epilogue_reads.indexed_dims))
        index_lines, self.index, size_names = flat_index_lines(self.output_domain, needed, "offsets", scope)

        body = [
            "pid = tl.program_id(0)",
            "# int64 offsets: the output (and positions in the input) may exceed 2**31 elements",
            "offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
            "# mask guards the last block",
            "mask = offsets < numel",
        ]
        if index_lines:
            body.append("# split each flat output offset into the indices of its dims")
            body += index_lines
        body += self._window_bounds()
        body += self._accumulators()
        body += self._tiled_loop() if self.tiled else self._direct_loops()
        body += self._finish()
        if plan.epilogue:
            if self.dtype != "float32":
                body += [
                    f"# the epilogue reads the {self.dtype} tensor PyTorch would store",
                    f"{self.result} = {self.result}.to({TRITON_DTYPES[self.dtype]}).to(tl.float32)",
                ]
            body += epilogue_reads.load_lines(self.index, "mask", flat_offsets="offsets")
            body += elementwise_lines(graph, plan.epilogue, epilogue_variables, scope, self.context.helpers)
        output_pointers = {value: scope.fresh(f"{epilogue_variables[value]}_ptr") for value in plan.outputs}
        indices_pointer = scope.fresh(f"{self.argmax}_ptr") if self.argmax else None
        body.append("# the outputs are new contiguous tensors: an element's offset is its flat index")
        for value in plan.outputs:
            dtype = self.dtype if value == plan.anchor else graph.spec_of(value).dtype
            value_stored = stored(epilogue_variables[value], dtype)
            body.append(f"tl.store({output_pointers[value]} + offsets, {value_stored}, mask=mask)")
        if indices_pointer:
            body.append(f"tl.store({indices_pointer} + offsets, {self.argmax}, mask=mask)")

        parameters = (
            self.window_reads.pointer_parameters()
            + epilogue_reads.pointer_parameters()
            + list(output_pointers.values())
            + ([indices_pointer] if indices_pointer else [])
            + ["numel"]
            + list(size_names.values())
            + list(self.input_size.values())
            + list(self.max_window.values())
            + self.window_reads.stride_parameters()
            + epilogue_reads.stride_parameters()
            + epilogue_reads.flag_parameters()
            + (["PLANE_CONTIGUOUS: tl.constexpr"] if self.whole_plane else [])
            + ["BLOCK: tl.constexpr"]
            + (["WINDOW: tl.constexpr"] if self.tiled else [])
        )
        lines = ["@triton.jit", f"def {plan.kernel}("]
        lines += [f"{INDENT}{parameter}," for parameter in parameters]
        lines += ["):", f'{INDENT}"""Replaces {self._replaced()}.', ""]
        lines += [f"{INDENT}{line}" for line in self._description()]
        lines += [f'{INDENT}"""']
        lines += [f"{INDENT}{line}" for line in body]
        kernel = "\n".join(lines) + "\n"
        return kernel + "\n\n" + self._wrapper(epilogue_reads, list(size_names))

    def _replaced(self) -> str:
        plan = self.plan
        text = f"{self.nodes[plan.anchor].op} ({plan.anchor})"
        if plan.prologue:
            text += ", after " + ", ".join(f"{self.nodes[name].op} ({name})" for name in plan.prologue)
        if plan.epilogue:
            text += ", then " + ", ".join(f"{self.nodes[name].op} ({name})" for name in plan.epilogue)
        return text

    def _description(self) -> list[str]:
        window = self.window
        if window.adaptive:
            what = "adaptive windows (start floor(o * in / out), end ceil((o + 1) * in / out))"
        else:
            size = "x".join(str(size) for size in window.kernel)
            what = f"{size} windows (stride {_listed(window.stride)}, padding {_listed(window.padding)}"
            what += f", dilation {_listed(window.dilation)})" if window.takes_maximum else ")"
            if window.ceil_mode:
                what += " in ceil mode"
        if window.takes_maximum:
            combine = "the maximum (NaN propagates; ties keep the first position"
            combine += ", whose flat index in its plane is the index output)" if window.with_indices else ")"
        elif window.adaptive:
            combine = "the float32 average"
        elif window.divisor_override is not None:
            combine = f"the float32 sum divided by {window.divisor_override}"
        elif window.count_include_pad:
            combine = "the float32 average, padding counted in the divisor"
        else:
            combine = "the float32 average over the positions inside the input"
        how = (
            "reading BLOCK x WINDOW tiles of (output element, window position)"
            if self.tiled
            else "each lane walking its own window"
        )
        return [
            f"Each program computes BLOCK elements of the {domain_text(self.output_domain)} output over",
            f"{what} of the {domain_text(self.input_domain)} input, read through its strides, {how}:",
            f"{combine}.",
        ]

    def _reads_whole_planes(self) -> bool:
        """Whether the tiled loop walks whole planes of 2 or 3 pooled dims (an adaptive average to size 1) that every
        window read varies along entirely or not at all: then a plane stored contiguously is read at flat offsets."""
        window = self.window
        if not (self.tiled and window.adaptive and not window.takes_maximum and set(window.output_size) == {1}):
            return False
        pooled = {dim for dim in range(self.leading, len(self.input_domain)) if self.input_domain[dim] != 1}
        # the flat position walks the innermost pooled dim: it must be the input's last (a size-1 one has no stride)
        return len(pooled) > 1 and len(self.input_domain) - 1 in pooled and all(
            pooled <= set(read.strides) or not pooled & set(read.strides) for read in self.window_reads.reads
        )

    def _output_index(self, dim: int) -> str | None:
        """The index variable of output dim `dim`, or None where the dim has size 1 (index 0)."""
        return self.index.get(dim)

    def _window_bounds(self) -> list[str]:
        """Where each output element's window starts (and, adaptive, ends) along each pooled dim."""
        window = self.window
        lines: list[str] = []
        if window.adaptive:
            lines.append("# PyTorch's adaptive windows: start = floor(o * in / out), end = ceil((o + 1) * in / out)")
        else:
            lines.append("# each window's first input position per pooled dim (negative inside the padding)")
        for position, name in enumerate(self.spatial_names):
            index = self._output_index(self.leading + position)
            start, size = self.start[name], self.input_size[name]
            if window.adaptive:
                output = window.output_size[position]
                if index is None:
                    lines.append(f"{start} = tl.zeros([BLOCK], tl.int64)")
                    lines.append(f"{self.end[name]} = {start} + {size}")
                    continue
                lines.append(f"{start} = {index} * {size} // {output}")
                lines.append(f"{self.end[name]} = (({index} + 1) * {size} + {output - 1}) // {output}")
                continue
            stride, pad = window.stride[position], window.padding[position]
            if index is None:
                lines.append(f"{start} = tl.full([BLOCK], {-pad}, tl.int64)")
                continue
            expression = index if stride == 1 else f"{index} * {stride}"
            lines.append(f"{start} = {expression}" + (f" - {pad}" if pad else ""))
        if window.with_indices:
            lines += self._first_positions()
        return lines

    def _first_positions(self) -> list[str]:
        """The index output's starting value: the window's first position inside the input, as PyTorch seeds it."""
        window = self.window
        lines = ["# PyTorch seeds the index with the window's first position inside the input (kept if nothing beats -inf)"]
        for position, name in enumerate(self.spatial_names):
            start, first = self.start[name], self.first[name]
            if window.adaptive or window.padding[position] == 0:
                lines.append(f"{first} = {start}")
            elif window.dilation[position] == 1:
                lines.append(f"{first} = tl.maximum({start}, 0)")
            else:
                step = window.dilation[position]
                skipped = f"(({step - 1} - {start}) // {step}) * {step}"
                lines.append(f"{first} = tl.where({start} < 0, {start} + {skipped}, {start})")
        lines.append(f"{self.argmax} = {self._flat_position(self.first)}")
        return lines

    def _flat_position(self, positions: dict[str, str]) -> str:
        """Row-major index of a position within its input plane (what PyTorch's index output holds)."""
        names = self.spatial_names
        expression = positions[names[0]]
        for name in names[1:]:
            expression = f"({expression}) * {self.input_size[name]} + {positions[name]}"
        return expression

    def _accumulators(self) -> list[str]:
        if self.window.takes_maximum:
            return [f"{self.result} = tl.full([BLOCK], {NEGATIVE_INFINITY}, tl.float32)"]
        return ["total = tl.zeros([BLOCK], tl.float32)"]

    def _needs_bounds(self, position: int) -> bool:
        return self.window.adaptive or self.window.reaches_outside(position)

    def _bound_check(self, position: int, name: str, pos: str) -> str:
        if self.window.adaptive:
            end = self.end[name] if not self.tiled else f"{self.end[name]}[:, None]"
            return f"({pos} < {end})"
        checks = []
        if self.window.padding[position] > 0:
            checks.append(f"({pos} >= 0)")
        checks.append(f"({pos} < {self.input_size[name]})")
        return " & ".join(checks)

    def _window_loads(self, index_of_dim: dict[int, str], mask: str) -> list[str]:
        """Loads (and the prologue) giving the anchor's input at the current window positions, in float32."""
        lines = self.window_reads.load_lines(index_of_dim, mask)
        lines += elementwise_lines(self.graph, self.plan.prologue, self.window_variables, self.scope, self.context.helpers)
        source = self.window.source
        spec = self.graph.spec_of(source)
        variable = self.window_variables[source]
        if self.plan.prologue and spec.dtype != "float32":
            lines += [
                f"# the prologue's result is a {spec.dtype} tensor in PyTorch: round it before pooling",
                f"{variable} = {variable}.to({TRITON_DTYPES[spec.dtype]}).to(tl.float32)",
            ]
        if all(size == 1 for size in spec.shape):
            lines += [
                f"# {variable} is one element loaded once: spread it over the lanes, as the comparisons below need",
                f"{variable} = tl.broadcast_to({variable}, {mask}.shape)",
            ]
        return lines

    def _direct_loops(self) -> list[str]:
        """Nested loops over window offsets, one per pooled dim; each lane walks its own window."""
        window = self.window
        lines: list[str] = []
        depth = 0
        inside_terms = []
        for position, name in enumerate(self.spatial_names):
            offset, pos = self.offset[name], self.position[name]
            if window.adaptive:
                loop = f"for {offset} in range(0, {self.max_window[name]}):"
                step = offset
            else:
                loop = f"for {offset} in tl.static_range({window.kernel[position]}):"
                dilation = window.dilation[position]
                step = offset if dilation == 1 else f"{offset} * {dilation}"
            lines.append(INDENT * depth + loop)
            depth += 1
            lines.append(INDENT * depth + f"{pos} = {self.start[name]} + {step}")
            if self._needs_bounds(position):
                lines.append(INDENT * depth + f"{self.inside_dim[name]} = {self._bound_check(position, name, pos)}")
                inside_terms.append(self.inside_dim[name])
        inner: list[str] = []
        if inside_terms:
            comment = "window ends beyond" if window.adaptive else "positions in the padding (or past the input)"
            inner.append(f"# {comment}: not read, and never count")
            inner.append(f"inside = mask & {' & '.join(inside_terms)}")
            load_mask = "inside"
        else:
            inner.append("# every window lies inside the input (no padding, floor mode)")
            load_mask = "mask"
        index_of_dim = self._input_indices(lambda index: index, lambda name: self.position[name])
        inner += self._window_loads(index_of_dim, load_mask)
        value = self.window_variables[window.source]
        if window.takes_maximum:
            guard = "inside & " if inside_terms else ""
            inner += [
                "# PyTorch's running max: a larger value or a NaN takes over, so ties keep the first position",
                f"takes = {guard}(({value} > {self.result}) | ({value} != {value}))",
                f"{self.result} = tl.where(takes, {value}, {self.result})",
            ]
            if self.argmax:
                inner.append(f"{self.argmax} = tl.where(takes, {self._flat_position(self.position)}, {self.argmax})")
        elif inside_terms:
            inner.append(f"total += tl.where(inside, {value}, 0.0)")
        else:
            inner.append(f"total += {value}")
        return lines + [INDENT * depth + line for line in inner]

    def _tiled_loop(self) -> list[str]:
        """One loop over the flattened window (row-major, as PyTorch walks it), WINDOW positions per step."""
        window = self.window
        names = self.spatial_names
        if window.adaptive:
            extents = {name: self.max_window[name] for name in names}
            size = " * ".join(extents[name] for name in names)
            lines = [f"window_size = {size}"]
            window_size = "window_size"
            partial_last_step = True
        else:
            extents = {name: str(window.kernel[position]) for position, name in enumerate(names)}
            window_size = str(math.prod(window.kernel))
            lines = []
            partial_last_step = math.prod(window.kernel) % self.plan.params["window"] != 0
        lines.append(f"for window_offset in range(0, {window_size}, WINDOW):")
        body = ["window = window_offset + tl.arange(0, WINDOW)"]
        if self.whole_plane:
            body += self._whole_plane_positions(extents)
        else:
            body += self._window_positions(extents, window_size, partial_last_step)
        index_of_dim = self._input_indices(lambda index: f"{index}[:, None]", lambda name: self.position[name])
        body += self._window_loads(index_of_dim, "inside")
        value = self.window_variables[window.source]
        if window.takes_maximum:
            body += [
                "# PyTorch's running max over this chunk: a NaN takes over; else a strictly larger maximum",
                f"chunk_nan = inside & ({value} != {value})",
                "chunk_has_nan = tl.max(chunk_nan.to(tl.int32), axis=1) > 0",
                f"chunk_max = tl.max(tl.where(inside & ({value} == {value}), {value}, {NEGATIVE_INFINITY}), axis=1)",
                f"takes = chunk_has_nan | (chunk_max > {self.result})",
                f"{self.result} = tl.where(takes, tl.where(chunk_has_nan, float(\"nan\"), chunk_max), {self.result})",
            ]
            if self.argmax:
                body += [
                    "# the index: the chunk's last NaN, else the first position holding its maximum",
                    f"position = {self._flat_position(self.position)}",
                    "chunk_index = tl.where(",
                    f"{INDENT}chunk_has_nan,",
                    f"{INDENT}tl.max(tl.where(chunk_nan, position, -1), axis=1),",
                    f"{INDENT}tl.min(tl.where(inside & ({value} == chunk_max[:, None]), position, {NO_POSITION}), axis=1),",
                    ")",
                    f"{self.argmax} = tl.where(takes, chunk_index, {self.argmax})",
                ]
        else:
            body.append(f"total += tl.sum(tl.where(inside, {value}, 0.0), axis=1)")
        return lines + [INDENT + line for line in body]

    def _window_positions(self, extents: dict[str, str], window_size: str, partial_last_step: bool) -> list[str]:
        """Each tile's input positions per pooled dim, and `inside`: the tile entries read."""
        window, names = self.window, self.spatial_names
        body = self._window_offsets(extents)
        terms = ["mask[:, None]"]
        if partial_last_step:
            terms.append(f"(window < {window_size})[None, :]")
        for position, name in enumerate(names):
            dilation = 1 if window.adaptive else window.dilation[position]
            step = f"{self.offset[name]}[None, :]"
            if dilation != 1:
                step += f" * {dilation}"
            pos = self.position[name]
            body.append(f"{pos} = {self.start[name]}[:, None] + {step}")
            if self._needs_bounds(position):
                terms.append(self._bound_check(position, name, pos))
        body.append("# window positions past the window, in the padding or past the input are not read")
        body.append(f"inside = {' & '.join(terms)}")
        return body

    def _whole_plane_positions(self, extents: dict[str, str]) -> list[str]:
        """Positions in whole planes: flat offsets where PLANE_CONTIGUOUS (no division, contiguous vector loads)."""
        names = self.spatial_names
        contiguous = [f"{self.position[name]} = 0" for name in names[:-1]]
        contiguous.append(f"{self.position[names[-1]]} = window[None, :]")
        split = [f"{self.position[name]} = {self.offset[name]}[None, :]" for name in names]
        return (
            [
                "# every window is a whole plane: its positions before window_size are all inside the input",
                "inside = mask[:, None] & (window < window_size)[None, :]",
                "if PLANE_CONTIGUOUS:",
                f"{INDENT}# each read's planes are contiguous: a window position is its offset in the plane",
            ]
            + [INDENT + line for line in contiguous]
            + ["else:"]
            + [INDENT + line for line in self._window_offsets(extents) + split]
        )

    def _window_offsets(self, extents: dict[str, str]) -> list[str]:
        """Statements splitting each flat window position into per-dim offsets."""
        names = self.spatial_names
        body = ["# split each window position into per-dim offsets (the last dim varies fastest)"]
        for position, name in enumerate(names):
            inner = [extents[other] for other in names[position + 1:]]
            if not inner:
                offset = "window"
            elif len(inner) == 1:
                offset = f"window // {inner[0]}"
            else:
                offset = f"window // ({' * '.join(inner)})"
            body.append(f"{self.offset[name]} = {offset}" + (f" % {extents[name]}" if position else ""))
        return body

    def _input_indices(self, leading_index, spatial_position) -> dict[int, str]:
        """Index expression per input dim: the output's index for leading dims, the window position for pooled dims."""
        index_of_dim: dict[int, str] = {}
        for dim in range(self.leading):
            index = self._output_index(dim)
            if index is not None:
                index_of_dim[dim] = leading_index(index)
        for position, name in enumerate(self.spatial_names):
            index_of_dim[self.leading + position] = spatial_position(name)
        return index_of_dim

    def _finish(self) -> list[str]:
        window = self.window
        if window.takes_maximum:
            return []
        names = self.spatial_names
        result = self.result
        if window.global_mean:
            count = " * ".join(["1.0"] + [self.input_size[name] for name in names])
            return [
                "# PyTorch computes a global average pool as a mean: one division by the count",
                f"{result} = tl.div_rn(total, {count})",
            ]
        if window.adaptive:
            divided = "total"
            for name in names:
                divided = f"tl.div_rn({divided}, ({self.end[name]} - {self.start[name]}).to(tl.float32))"
            return ["# divided by each window extent in turn, as PyTorch does", f"{result} = {divided}"]
        if window.divisor_override is not None:
            return [f"{result} = tl.div_rn(total, {float(window.divisor_override)!r})"]
        extents = []
        for position, name in enumerate(names):
            kernel, pad, start = window.kernel[position], window.padding[position], self.start[name]
            if not window.reaches_outside(position):
                extents.append(str(kernel))
            elif window.count_include_pad:
                # the window counts padding, but not what ceil mode adds past the padding
                extents.append(f"(tl.minimum({start} + {kernel}, {self.input_size[name]} + {pad}) - {start})")
            else:
                extents.append(f"(tl.minimum({start} + {kernel}, {self.input_size[name]}) - tl.maximum({start}, 0))")
        if all(extent.isdigit() for extent in extents):
            return [f"{result} = tl.div_rn(total, {float(math.prod(window.kernel))!r})"]
        if window.count_include_pad:
            rule = "padding counts, positions past it do not"
        else:
            rule = "only positions inside the input count"
        return [
            f"# PyTorch's divisor: {rule}",
            f"divisor = ({' * '.join(extents)}).to(tl.float32)",
            f"{result} = tl.div_rn(total, divisor)",
        ]

    # --- wrapper ------------------------------------------------------------------------------

    def _wrapper(self, epilogue_reads: DomainReads, size_dims: list[int]) -> str:
        plan, graph, window = self.plan, self.graph, self.window
        scope = self.context.scope()
        tensors = {value: scope.fresh(value) for value in plan.inputs}
        input_shape, output_shape, numel, block, grid = (
            scope.fresh(name) for name in ("input_shape", "output_shape", "numel", "BLOCK", "grid")
        )
        sizes = {name: scope.fresh(f"input_{name}") for name in self.spatial_names}
        outputs = {value: scope.fresh(value) for value in plan.outputs}
        indices = scope.fresh(f"{plan.anchor}_indices") if window.with_indices else None
        device = f"{tensors[plan.inputs[0]]}.device"

        window_inputs = [value for value in plan.inputs if value in self.window_values]
        full_shape = [value for value in window_inputs if graph.spec_of(value).shape == self.input_domain]
        returned = list(outputs.values()) if not indices else [outputs[plan.anchor], indices]
        lines = [
            f"def {plan.wrapper}({', '.join(tensors.values())}):",
            f'{INDENT}"""Computes {", ".join(plan.nodes)} in one launch of {plan.kernel}; '
            f'returns {", ".join(returned)}."""',
        ]
        if full_shape:
            lines.append(f"{input_shape} = {tensors[full_shape[0]]}.shape")
        else:
            shapes = ", ".join(f"{tensors[value]}.shape" for value in window_inputs)
            lines.append(f"{input_shape} = torch.broadcast_shapes({shapes})")
        spatial = window.spatial
        lines.append(
            f"{', '.join(sizes.values())}{',' if spatial == 1 else ''} = {input_shape}[{-spatial}:]"
        )
        output_sizes: list[str] = []
        if window.adaptive:
            output_sizes = [str(size) for size in window.output_size]
        else:
            lines.append("# PyTorch's pooling_output_shape: windows that start inside the input or its left padding")
            for position, name in enumerate(self.spatial_names):
                output_size = scope.fresh(f"output_{name}")
                output_sizes.append(output_size)
                lines += self._output_size_lines(position, sizes[name], output_size)
        lines.append(f"{output_shape} = (*{input_shape}[:{-spatial}], {', '.join(output_sizes)})")
        for value, variable in outputs.items():
            dtype = self.dtype if value == plan.anchor else graph.spec_of(value).dtype
            lines.append(f"{variable} = torch.empty({output_shape}, dtype=torch.{dtype}, device={device})")
        if indices:
            lines.append(f"{indices} = torch.empty({output_shape}, dtype=torch.int64, device={device})")
        lines.append(f"{numel} = {returned[0]}.numel()")
        window_strides, window_stride_arguments, _ = self.window_reads.wrapper_arguments(tensors, scope)
        epilogue_strides, epilogue_stride_arguments, flags = epilogue_reads.wrapper_arguments(tensors, scope)
        lines += window_strides + epilogue_strides
        plane_contiguous = scope.fresh("plane_contiguous")
        if self.whole_plane:
            lines.append("# the window reads' planes as stored row-major: they are read at flat offsets in the plane")
            lines.append(f"{plane_contiguous} = {self._plane_contiguity(sizes, window_stride_arguments)}")
        max_windows: list[str] = []
        if window.adaptive:
            lines.append("# the longest adaptive window: in / out, or 2 more where out does not divide in")
            for position, name in enumerate(self.spatial_names):
                longest = scope.fresh(f"max_window_{name}")
                max_windows.append(longest)
                out = window.output_size[position]
                lines.append(f"{longest} = {sizes[name]} // {out} + (2 if {sizes[name]} % {out} else 0)")
        lines += [
            f"{block} = {plan.params['block']}",
            f"# one program per block of {block} output elements",
            f"{grid} = (triton.cdiv({numel}, {block}),)",
            f"{plan.kernel}[{grid}](",
        ]
        arguments = (
            [tensors[read.value] for read in self.window_reads.reads]
            + [tensors[read.value] for read in epilogue_reads.reads]
            + list(outputs.values())
            + ([indices] if indices else [])
            + [numel]
            + [f"{output_shape}[{dim}]" for dim in size_dims]
            + list(sizes.values())
            + max_windows
            + window_stride_arguments
            + epilogue_stride_arguments
            + flags
            + ([f"PLANE_CONTIGUOUS={plane_contiguous}"] if self.whole_plane else [])
            + [f"BLOCK={block}"]
            + ([f"WINDOW={plan.params['window']}"] if self.tiled else [])
            + [f"num_warps={plan.params['warps']}"]
        )
        lines += [f"{INDENT}{argument}," for argument in arguments]
        lines += [")", f"return {', '.join(returned)}"]
        body = lines[2:]
        return "\n".join(lines[:2] + [INDENT + line for line in body]) + "\n"

    def _plane_contiguity(self, sizes: dict[str, str], stride_arguments: list[str]) -> str:
        """An expression: whether every window read varying along the pooled dims holds each plane row-major
        (the last pooled dim unit-strided, each other of size other than 1 strided by the product of the later
        pooled sizes)."""
        names = self.spatial_names
        checks: list[str] = []
        arguments = iter(stride_arguments)
        for read in self.window_reads.reads:
            strides = {dim: next(arguments) for dim in read.strides}
            for position, name in enumerate(names):
                stride = strides.get(self.leading + position)
                if stride is None:
                    continue
                if position == len(names) - 1:
                    # the flat position steps along this dim, whatever its size: it must be unit-strided
                    checks.append(f"{stride} == 1")
                    continue
                later = " * ".join(sizes[other] for other in names[position + 1:])
                checks.append(f"({sizes[name]} == 1 or {stride} == {later})")
        return " and ".join(checks) or "True"

    def _output_size_lines(self, position: int, size: str, output: str) -> list[str]:
        window = self.window
        kernel, stride, pad = window.kernel[position], window.stride[position], window.padding[position]
        span = window.dilation[position] * (kernel - 1) + 1
        shift = 2 * pad - span + (stride - 1 if window.ceil_mode else 0)
        numerator = size if shift == 0 else f"{size} {'+' if shift > 0 else '-'} {abs(shift)}"
        lines = [f"{output} = ({numerator}) // {stride} + 1"]
        if window.ceil_mode:
            lines += [
                f"if ({output} - 1) * {stride} >= {size}" + (f" + {pad}:" if pad else ":"),
                f"{INDENT}{output} -= 1",
            ]
        return lines


def _listed(values: tuple[int, ...]) -> str:
    return "x".join(str(value) for value in values)
