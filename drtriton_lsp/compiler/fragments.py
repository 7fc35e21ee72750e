"""Fragments of a graph for test-time search: a sub-graph as its own task, and the alternative
schedules for the ops one search step covers (keep them, re-tune them, split the kernel, or compute
a kept op, such as a convolution, in its template's kernel together with the pointwise ops after it).

A fragment's node names are the whole graph's, so an alternative chosen for a fragment is also a
valid set of lines in the whole graph's script.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Sequence

from drtriton_lsp.compiler.forward_source import render_forward
from drtriton_lsp.compiler.graph import GraphInput, OpGraph, OpNode
from drtriton_lsp.compiler.names import NameScope
from drtriton_lsp.compiler.partition import Anchored
from drtriton_lsp.compiler.planner import GraphRoles, classify, default_kernel_line, default_schedule, lower_schedule
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


@dataclass(frozen=True)
class SearchStep:
    """Lines of a schedule that one fragment measures together.

    positions: the lines' indexes in the schedule, ascending; the chosen alternative takes the last
    one's place and the others are dropped. lines: the schedule's lines there (the "default").
    """

    positions: tuple[int, ...]
    lines: tuple[KernelLine | KeepLine, ...]

    @property
    def nodes(self) -> tuple[str, ...]:
        return tuple(name for line in self.lines for name in (line.nodes if isinstance(line, KernelLine) else (line.node,)))


def search_steps(graph: OpGraph, schedule: Schedule) -> list[SearchStep]:
    """What a search measures, in schedule order: every kernel line, and every kept op a template can
    compute (a convolution, which the default schedule keeps). Such an op is measured together with the
    first later line that reads it when that is a pointwise kernel line its template can take as the op's
    epilogue in that line's place; otherwise alone.
    """
    roles = classify(graph)
    nodes = {node.name: node for node in graph.nodes}
    steps: list[SearchStep] = []
    joined: set[int] = set()  # kernel lines measured with the kept op before them
    for position, line in enumerate(schedule.steps):
        if isinstance(line, KeepLine) and isinstance(roles.roles.get(line.node), Anchored):
            epilogue = _epilogue_position(graph, roles, nodes, schedule, position)
            if epilogue is None or epilogue in joined:
                steps.append(SearchStep((position,), (line,)))
            else:
                joined.add(epilogue)
                steps.append(SearchStep((position, epilogue), (line, schedule.steps[epilogue])))
        elif isinstance(line, KernelLine) and position not in joined:
            steps.append(SearchStep((position,), (line,)))
    return steps


def _epilogue_position(
    graph: OpGraph, roles: GraphRoles, nodes: dict[str, OpNode], schedule: Schedule, kept_position: int
) -> int | None:
    """The position of the first line after the kept op that reads it, if that line is a pointwise kernel
    its template can take as the op's epilogue: it reads the op directly (not through a view), and the
    op with its ops lowers as one kernel. Nothing before that line reads the op, so the op can move there.
    """
    kept = schedule.steps[kept_position].node
    # the op's value and its views (they run where first needed, so reading one reads the op)
    viewed = {kept}
    for node in graph.nodes:
        if node.name in roles.implied and viewed.intersection(node.input_refs()):
            viewed.add(node.name)
    for position in range(kept_position + 1, len(schedule.steps)):
        line = schedule.steps[position]
        members = line.nodes if isinstance(line, KernelLine) else (line.node,)
        reads = viewed.intersection(ref for member in members for ref in nodes[member].input_refs())
        if reads:
            break
    else:
        return None
    if not isinstance(line, KernelLine) or line.template != POINTWISE.name or reads != {kept}:
        return None
    order = {node.name: index for index, node in enumerate(graph.nodes)}
    try:
        default_kernel_line(graph, roles.roles[kept].template, tuple(sorted((kept, *members), key=order.__getitem__)), roles)
    except ScheduleError:
        return None
    return position


def step_alternatives(
    graph: OpGraph, step: SearchStep, *, allow_tf32: bool = False
) -> list[tuple[str, tuple[KernelLine | KeepLine, ...]]]:
    """Labelled alternatives for a search step: `line_alternatives` for a kernel line; for a kept op, its
    template's kernel (with the pointwise ops of a kernel line measured with it as epilogue) and that
    kernel's parameter variants, alternating with the variants of the pointwise line after the kept op.
    """
    if len(step.lines) == 1 and isinstance(step.lines[0], KernelLine):
        return line_alternatives(graph, step.lines[0], allow_tf32=allow_tf32)
    kept, *after = step.lines
    fragment = fragment_graph(graph, step.nodes)
    roles = classify(fragment)
    template = roles.roles[kept.node].template
    order = {node.name: index for index, node in enumerate(fragment.nodes)}
    fused = default_kernel_line(fragment, template, tuple(sorted(step.nodes, key=order.__getitem__)), roles)
    fused_variants = [(f"{template} {label}", (line,)) for label, line in _parameter_variants(fused, allow_tf32)]
    if after:
        # the pointwise line's own alternatives ("default", "pytorch", its variants), the op kept before it
        separate = [(label, (kept,) + lines) for label, lines in line_alternatives(fragment, after[0], allow_tf32=allow_tf32)]
        firsts = [candidate for candidate in separate if candidate[0] in ("default", "pytorch")]
        separate_variants = [candidate for candidate in separate if candidate not in firsts]
    else:
        firsts, separate_variants = [("pytorch", (kept,))], []
    interleaved = [
        candidate
        for pair in itertools.zip_longest(fused_variants, separate_variants)
        for candidate in pair
        if candidate is not None
    ]
    candidates = firsts[:1] + [(template, (fused,))] + firsts[1:] + interleaved
    return _decodable(fragment, candidates)


def line_alternatives(
    graph: OpGraph, line: KernelLine, *, allow_tf32: bool = False
) -> list[tuple[str, tuple[KernelLine | KeepLine, ...]]]:
    """Labelled alternatives for one kernel line: the line itself, its parameter variants, PyTorch's
    kernels for all its ops, and (for anchored kernels) splits at the prologue and the epilogue.

    Every alternative is checked against the fragment's graph, so each one decodes. TF32 variants
    are left out unless the user allowed TF32 (float32 stays exact by default).
    """
    fragment = fragment_graph(graph, line.nodes)
    candidates: list[tuple[str, tuple[KernelLine | KeepLine, ...]]] = [("default", (line,))]
    candidates += [(label, (variant,)) for label, variant in _parameter_variants(line, allow_tf32)]
    candidates.append(("pytorch", tuple(KeepLine(name) for name in line.nodes)))
    candidates += _splits(fragment, line)
    return _decodable(fragment, candidates)


def _parameter_variants(line: KernelLine, allow_tf32: bool) -> list[tuple[str, KernelLine]]:
    """The line with its template's search parameters, labelled by what changed (TF32 only if allowed)."""
    template = TEMPLATES[line.template]
    specs = {spec.name: spec for spec in template.parameters}
    defaults = dict(line.params)
    variants = []
    for params in template.search_parameters(defaults):
        if params == defaults or (params.get("precision") == "tf32" and not allow_tf32):
            continue
        changed = " ".join(f"{name}={specs[name].render(value)}" for name, value in params.items() if value != defaults[name])
        variants.append((changed, _with_params(line, params)))
    return variants


def _decodable(
    fragment: OpGraph, candidates: list[tuple[str, tuple[KernelLine | KeepLine, ...]]]
) -> list[tuple[str, tuple[KernelLine | KeepLine, ...]]]:
    """The candidates whose lines lower on the fragment's graph."""
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
