"""What every kernel template provides: its schedule parameters, which ops it anchors, how it renders.

A template is one kind of kernel (pointwise, reduce, matmul, ...). The planner groups ops around an
anchor op the template claims; the template renders the group from a `KernelPlan` and its parameters.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from drtriton_lsp.compiler.graph import Dim, OpGraph, OpNode
from drtriton_lsp.compiler.names import NameScope


# the size default parameters assume for a free dimension without an example value (capture records
# one for every symbol, so this is only a fallback)
UNKNOWN_SIZE = 1024


def example_size(size: Dim, graph: OpGraph) -> int:
    """A dimension's size in the example inputs: itself when fixed, its symbol's example value when free."""
    return size if isinstance(size, int) else graph.symbol_hints.get(size, UNKNOWN_SIZE)


def example_extent(sizes, graph: OpGraph) -> int:
    """The product of `sizes` in the example inputs."""
    return math.prod(example_size(size, graph) for size in sizes)


def next_power_of_two(value: int) -> int:
    """The smallest power of two at or above `value` (1 for 0 and 1)."""
    return 1 << max(value - 1, 0).bit_length()


def power_of_two_within(size: int, low: int, high: int) -> int:
    """The smallest power of two that covers `size`, clamped to [low, high] (a tile size for a problem size)."""
    return min(high, max(low, next_power_of_two(size)))


def graph_ref(value: Any) -> str | None:
    """The graph value an op argument names ({"ref": name}); None for anything else."""
    return value["ref"] if isinstance(value, dict) and "ref" in value else None


def int_per_dim(value: Any, length: int) -> tuple[int, ...] | None:
    """An int or int list argument (a window's size, stride, padding) as `length` ints (one int repeats);
    None if it is anything else."""
    if isinstance(value, dict) and "list" in value:
        items = value["list"]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        items = [value]
    if not all(isinstance(item, int) and not isinstance(item, bool) for item in items):
        return None
    if len(items) == 1:
        return tuple(items) * length
    return tuple(items) if len(items) == length else None


@dataclass(frozen=True)
class ParameterSpec:
    """One schedule choice: its name in scripts, how its text parses, what it means.

    parse: canonical text -> value, raising ValueError with a readable reason; `render(parse(t)) == t`
    must hold for accepted text, so the parser rejects any other spelling of the same value.
    values: every allowed value, in a fixed order (what a search may try).
    """

    name: str
    parse: Callable[[str], Any]
    render: Callable[[Any], str]
    doc: str
    values: tuple[Any, ...]


def power_of_two(name: str, low: int, high: int, doc: str) -> ParameterSpec:
    """An integer power of two in [low, high], written in decimal."""

    def parse(text: str) -> int:
        if not text.isdigit() or text != str(int(text)):
            raise ValueError(f"expected a decimal integer, got {text!r}")
        value = int(text)
        if value & (value - 1) or not low <= value <= high:
            raise ValueError(f"expected a power of two from {low} to {high}, got {value}")
        return value

    values = tuple(1 << shift for shift in range(high.bit_length()) if low <= 1 << shift <= high)
    return ParameterSpec(name, parse, str, doc, values)


def choice(name: str, options: tuple[str, ...], doc: str) -> ParameterSpec:
    """One word out of `options`."""

    def parse(text: str) -> str:
        if text not in options:
            raise ValueError(f"expected one of {', '.join(options)}, got {text!r}")
        return text

    return ParameterSpec(name, parse, str, doc, options)


def whole_number(name: str, low: int, high: int, doc: str) -> ParameterSpec:
    """An integer in [low, high], written in decimal."""

    def parse(text: str) -> int:
        if not text.isdigit() or text != str(int(text)):
            raise ValueError(f"expected a decimal integer, got {text!r}")
        value = int(text)
        if not low <= value <= high:
            raise ValueError(f"expected an integer from {low} to {high}, got {value}")
        return value

    return ParameterSpec(name, parse, str, doc, tuple(range(low, high + 1)))




def tile(name: str, axes: tuple[str, ...], low: int, high: int, doc: str) -> ParameterSpec:
    """Powers of two joined by "x", one per axis (e.g. "64x128x32" for M, N, K)."""
    axis_spec = power_of_two(name, low, high, doc)

    def parse(text: str) -> tuple[int, ...]:
        parts = text.split("x")
        if len(parts) != len(axes):
            raise ValueError(f"expected {len(axes)} sizes joined by 'x' ({'x'.join(axes)}), got {text!r}")
        return tuple(axis_spec.parse(part) for part in parts)

    values = tuple(itertools.product(axis_spec.values, repeat=len(axes)))
    return ParameterSpec(name, parse, lambda sizes: "x".join(str(size) for size in sizes), doc, values)


@dataclass(frozen=True)
class AnchorShape:
    """How an anchor op shapes its kernel.

    primary_input: the value a prologue may compute in-kernel instead of loading (None: no prologue).
    input_domain: shape of the primary input. output_domain: shape of the op's single output,
    where epilogue ops run (None: the op allows no epilogue, e.g. it returns several tensors).
    """

    primary_input: str | None
    input_domain: tuple[Dim, ...]
    output_domain: tuple[Dim, ...] | None


@dataclass(frozen=True)
class KernelPlan:
    """One kernel, fully decided: what it computes, what it reads and stores, with which parameters.

    nodes: every op it computes, in graph order. anchor: the template's op (None for pointwise; a row
    kernel's first reduction, with no prologue and epilogue: `row.row_group` places its ops).
    prologue: pointwise ops computed on the anchor's primary input before it (in graph order);
    epilogue: pointwise ops in the anchor's output domain (for pointwise kernels: all nodes).
    domain: the shape the epilogue (or the pointwise body) iterates over.
    inputs: graph values read from memory, in order of first use; outputs: values stored.
    params: the template's parameters, parsed (name -> value).
    reduction: an op of the reduce template folding the epilogue's result over its last dim on each
    output tile (templates with `reduces_output`; None: no reduction); reduced_epilogue: pointwise
    ops on the reduction's result, in its output shape.
    """

    template: str
    wrapper: str
    kernel: str
    nodes: tuple[str, ...]
    ops: tuple[str, ...]
    anchor: str | None
    prologue: tuple[str, ...]
    epilogue: tuple[str, ...]
    domain: tuple[Dim, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    params: dict[str, Any] = field(default_factory=dict)
    reduction: str | None = None
    reduced_epilogue: tuple[str, ...] = ()


class Template:
    """Base class of kernel templates; subclasses set `name` and `parameters` and override the rest."""

    name: str = ""
    parameters: tuple[ParameterSpec, ...] = ()
    # the ops it covers, in a few words: shown when a script names an unknown template
    summary: str = ""
    # a kernel line may end in a reduction over the output's last dim, folded on each output tile
    # (never by default: only a script line or a search that measured it chooses it)
    reduces_output: bool = False
    # the ops of read members (`gather.read_members`) its kernels read where they need them: embedding lookups
    # gathered, reshapes read through their source's strides; any other read member runs in PyTorch first
    read_member_ops: tuple[str, ...] = ()

    def reads_in_place(self, member: OpNode, members: Sequence[str], graph: OpGraph) -> bool:
        """Whether this template's kernel of `members` reads the read member `member` where it needs it."""
        return member.op in self.read_member_ops

    def anchor(self, node: OpNode, graph: OpGraph) -> AnchorShape | None:
        """The op's kernel shape if this template computes it with PyTorch's semantics, else None."""
        return None

    def kept_by_default(self, node: OpNode, graph: OpGraph) -> bool:
        """Whether the default schedule keeps `node` (an op this template anchors) in PyTorch, where the
        library's kernel usually wins; a script line, or a search that measured the template faster, chooses it."""
        return False

    def unsupported_reason(self, node: OpNode, graph: OpGraph) -> str:
        """Why `anchor` declines `node`, for the error a script line naming this template gets ("" if
        the template has nothing more specific to say than that it cannot compute the op)."""
        return ""

    def reduction_problem(self, plan: KernelPlan, graph: OpGraph) -> str:
        """Why this template cannot fold `plan.reduction` into its kernel, "" if it can (for templates
        with `reduces_output`). plan.params is empty while the default parameters are being chosen."""
        raise NotImplementedError

    def parameter_problem(self, plan: KernelPlan, graph: OpGraph) -> str:
        """Why this plan's parameters do not fit its ops ("" when they do, or while plan.params is empty: the
        defaults are then being chosen)."""
        return ""

    def default_parameters(self, plan: KernelPlan, graph: OpGraph) -> dict[str, Any]:
        """The parameters the compiler picks when no script gives them (a heuristic, not a search)."""
        raise NotImplementedError

    def render(self, plan: KernelPlan, context: "RenderContext") -> str:
        """Source of the `@triton.jit` kernel and its Python launch wrapper `plan.wrapper`."""
        raise NotImplementedError

    def search_parameters(self, defaults: dict[str, Any]) -> list[dict[str, Any]]:
        """Parameter sets a search measures: each parameter moved one or two steps from its default
        along its allowed values, one at a time. Templates with coupled parameters override this."""
        variants: list[dict[str, Any]] = []
        for spec in self.parameters:
            position = spec.values.index(defaults[spec.name])
            for step in (-2, -1, 1, 2):
                if 0 <= position + step < len(spec.values):
                    variants.append({**defaults, spec.name: spec.values[position + step]})
        return variants


@dataclass
class RenderContext:
    """What templates share while rendering one program: the graph, device helpers, taken names."""

    graph: OpGraph
    helpers: Any  # elementwise.DeviceHelpers
    module_names: tuple[str, ...]

    def scope(self) -> NameScope:
        """A fresh name scope for one generated function, that never shadows a module-level name."""
        return NameScope(self.module_names)
