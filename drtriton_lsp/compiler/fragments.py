"""Fragments of a graph for test-time search: a sub-graph as its own task, and the alternative
schedules for the ops one script line covers (keep them, re-tune them, or split the kernel).

A fragment's node names are the whole graph's, so an alternative chosen for a fragment is also a
valid set of lines in the whole graph's script.
"""

from __future__ import annotations

from typing import Any, Sequence

from drtriton_lsp.compiler.forward_source import render_forward
from drtriton_lsp.compiler.graph import GraphInput, OpGraph
from drtriton_lsp.compiler.names import NameScope
from drtriton_lsp.compiler.partition import Anchored
from drtriton_lsp.compiler.planner import classify, default_schedule, lower_schedule
from drtriton_lsp.compiler.script import KeepLine, KernelLine, Schedule, ScheduleError
from drtriton_lsp.compiler.templates import POINTWISE, TEMPLATES
from drtriton_lsp.errors import DrtritonError

# random inputs of these dtypes are meaningful for any op; integer inputs (class indices, counts)
# need values from the real model, so fragments that read them are not searched
SEARCHABLE_INPUT_DTYPES = ("float32", "float16", "bfloat16", "bool")


class UnsearchableFragment(DrtritonError):
    """The ops cannot be run on their own with random inputs (tuple or integer inputs)."""


def fragment_graph(graph: OpGraph, ops: Sequence[str]) -> OpGraph:
    """The sub-graph that computes `ops` from what they read, returning what others read of them.

    Views the ops read are computed inside the fragment from its inputs.
    """
    nodes = {node.name: node for node in graph.nodes}
    implied = classify(graph).implied
    inside = set(ops)
    pending = list(ops)
    while pending:
        for ref in nodes[pending.pop()].input_refs():
            if ref in implied and ref not in inside:
                inside.add(ref)
                pending.append(ref)
    ordered = [node for node in graph.nodes if node.name in inside]
    scope = NameScope(("self",))
    inputs: list[GraphInput] = []
    for node in ordered:
        for ref in node.input_refs():
            if ref in inside or any(existing.name == ref for existing in inputs):
                continue
            spec = graph.spec_of(ref)
            if spec is None or spec.dtype not in SEARCHABLE_INPUT_DTYPES:
                raise UnsearchableFragment(
                    f"{node.name} reads {ref}, which cannot be drawn at random ({spec.dtype if spec else 'a tuple'})",
                    "the fragment keeps the compiler's default schedule",
                )
            inputs.append(GraphInput(name=ref, kind="user_input", target=scope.fresh(ref), spec=spec))
    readers = graph.users()
    outputs = [
        {"ref": node.name}
        for node in ordered
        if node.name in ops and any(reader not in inside for reader in readers.get(node.name, []))
    ]
    return OpGraph(
        inputs=inputs,
        nodes=ordered,
        outputs=outputs,
        returns_tuple=len(outputs) != 1,
        symbol_hints=dict(graph.symbol_hints),
        symbol_ranges=dict(graph.symbol_ranges),
    )


def fragment_task_source(fragment: OpGraph, description: str) -> str:
    """A KernelBench-form task whose Model runs the fragment's ops as the same ATen calls."""
    keep_all = Schedule(tuple(KeepLine(name) for name in schedulable_ops(fragment)))
    steps = lower_schedule(fragment, keep_all, "fragment", NameScope())
    parameters = [graph_input.target for graph_input in fragment.inputs]
    forward = render_forward(fragment, steps, name="fragment_forward", forward_params=parameters, has_self=True)
    inputs = ",\n        ".join(_random_tensor(graph_input, fragment.symbol_hints) for graph_input in fragment.inputs)
    return (
        f'"""Search fragment: {description}."""\n\n'
        "import torch\nfrom torch import nn\n\n\n"
        f"{forward}\n\n"
        "class Model(nn.Module):\n"
        f"    def forward(self, {', '.join(parameters)}):\n"
        f"        return fragment_forward(self, {', '.join(parameters)})\n\n\n"
        "def get_inputs():\n"
        f"    return [\n        {inputs},\n    ]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )


def schedulable_ops(graph: OpGraph) -> list[str]:
    """The ops a script must place (every op but views, tuple reads, shape math and dropped asserts)."""
    roles = classify(graph)
    return [node.name for node in graph.nodes if node.name not in roles.implied and node.name not in roles.dropped]


def _random_tensor(graph_input: GraphInput, hints: dict[str, int]) -> str:
    spec = graph_input.spec
    shape = ", ".join(str(hints.get(dim, 8) if isinstance(dim, str) else dim) for dim in spec.shape)
    shape = f"({shape},)" if len(spec.shape) == 1 else f"({shape})"
    if spec.dtype == "bool":
        return f"torch.rand{shape} > 0.5"
    return f"torch.randn{shape}.to(torch.{spec.dtype})"


def line_alternatives(
    graph: OpGraph, line: KernelLine, *, allow_tf32: bool = False
) -> list[tuple[str, tuple[KernelLine | KeepLine, ...]]]:
    """Labelled alternatives for one kernel line: the line itself, its parameter variants, PyTorch's
    kernels for all its ops, and (for anchored kernels) splits at the prologue and the epilogue.

    Every alternative is checked against the fragment's graph, so each one decodes. TF32 variants
    are left out unless the user allowed TF32 (float32 stays exact by default).
    """
    fragment = fragment_graph(graph, line.nodes)
    template = TEMPLATES[line.template]
    specs = {spec.name: spec for spec in template.parameters}
    defaults = dict(line.params)
    candidates: list[tuple[str, tuple[KernelLine | KeepLine, ...]]] = [("default", (line,))]
    for params in template.search_parameters(defaults):
        if params == defaults or (params.get("precision") == "tf32" and not allow_tf32):
            continue
        changed = " ".join(f"{name}={specs[name].render(value)}" for name, value in params.items() if value != defaults[name])
        candidates.append((changed, (_with_params(line, params),)))
    candidates.append(("pytorch", tuple(KeepLine(name) for name in line.nodes)))
    candidates += _splits(fragment, line)
    valid = []
    for label, lines in candidates:
        try:
            lower_schedule(fragment, Schedule(lines), "check", NameScope())
        except ScheduleError:
            continue
        valid.append((label, lines))
    return valid


def _with_params(line: KernelLine, params: dict[str, Any]) -> KernelLine:
    return KernelLine(line.template, line.nodes, tuple((name, params[name]) for name, _ in line.params))


def _splits(fragment: OpGraph, line: KernelLine) -> list[tuple[str, tuple[KernelLine | KeepLine, ...]]]:
    """The anchor's kernel without its prologue, and without its epilogue, the rest as pointwise kernels."""
    if line.template == POINTWISE.name:
        return []
    roles = classify(fragment)
    anchor = next(name for name in line.nodes if isinstance(roles.roles.get(name), Anchored))
    position = line.nodes.index(anchor)
    before, after = line.nodes[:position], line.nodes[position + 1 :]
    splits = []
    if before:
        rest = KernelLine(line.template, line.nodes[position:], line.params)
        splits.append(("split prologue", default_schedule(fragment_graph(fragment, before)).steps + (rest,)))
    if after:
        head = KernelLine(line.template, line.nodes[: position + 1], line.params)
        splits.append(("split epilogue", (head,) + default_schedule(fragment_graph(fragment, after)).steps))
    return splits
