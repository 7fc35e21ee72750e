"""Fragments of a graph for test-time search: a sub-graph as its own task, and the alternative
schedules for the ops one search step covers (keep them, re-tune them, split the kernel, compute
a kept op, such as a convolution, in its template's kernel together with the pointwise ops after it,
fold the reduce kernel after a matmul into the matmul's kernel, or compute consecutive pointwise and
reduce kernels over the same rows as one row kernel).

A fragment's node names are the whole graph's, so an alternative chosen for a fragment is also a
valid set of lines in the whole graph's script.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Sequence

from drtriton_lsp.compiler.errors import ScheduleError
from drtriton_lsp.compiler.forward_source import render_forward
from drtriton_lsp.compiler.graph import GraphInput, OpGraph, OpNode
from drtriton_lsp.compiler.names import NameScope
from drtriton_lsp.compiler.partition import Anchored
from drtriton_lsp.compiler.planner import (
    GraphRoles,
    classify,
    default_kernel_line,
    default_schedule,
    live_readers,
    lower_schedule,
    takes_channels_last,
)
from drtriton_lsp.compiler.script import KeepLine, KernelLine, Schedule
from drtriton_lsp.compiler.templates import POINTWISE, ROW, TEMPLATES
from drtriton_lsp.errors import DrtritonError

# random inputs of these dtypes are meaningful for any op; integer inputs (class indices, counts)
# need values from the real model, so fragments that read them are not searched
SEARCHABLE_INPUT_DTYPES = ("float32", "float16", "bfloat16", "bool")
# kernel lines a row kernel can take over together, and the most consecutive lines it is tried on
# (a written-out softmax is four lines, layer norm three)
ROW_RUN_TEMPLATES = (POINTWISE.name, "reduce")
MAX_ROW_RUN = 8


class UnsearchableFragment(DrtritonError):
    """The ops cannot be run on their own with random inputs (tuple or integer inputs)."""


def fragment_graph(graph: OpGraph, ops: Sequence[str]) -> OpGraph:
    """The sub-graph that computes `ops` from what they read, returning what others read of them.

    Views the ops read are computed inside the fragment from its inputs.
    """
    nodes = {node.name: node for node in graph.nodes}
    roles = classify(graph)
    implied = roles.implied
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
    readers = live_readers(graph, roles)
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


def channels_last_schedule(graph: OpGraph, schedule: Schedule) -> Schedule | None:
    """`schedule` with every kept 2-d convolution of a batch of images run channels-last (the kernels after one follow
    its layout, so the next convolution's input is already so laid out), or None when it keeps no such convolution."""
    nodes = {node.name: node for node in graph.nodes}
    relaid = tuple(
        KeepLine(line.node, "channels_last")
        if isinstance(line, KeepLine) and takes_channels_last(graph, nodes[line.node])
        else line
        for line in schedule.steps
    )
    return Schedule(relaid, schedule.replay) if relaid != schedule.steps else None


def schedulable_ops(graph: OpGraph) -> list[str]:
    """The ops a script must place (every op but views, tuple reads, shape math and dropped asserts)."""
    roles = classify(graph)
    return [node.name for node in graph.nodes if node.name not in roles.implied and node.name not in roles.dropped]


def _random_tensor(graph_input: GraphInput, hints: dict[str, int]) -> str:
    spec = graph_input.spec
    sizes = [str(hints.get(dim, 8) if isinstance(dim, str) else dim) for dim in spec.shape]
    # the size tuple as one argument: `torch.randn(())` is a 0-d tensor, `torch.randn()` an error
    shape = f"(({sizes[0]},))" if len(sizes) == 1 else f"(({', '.join(sizes)}))"
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
    epilogue in that line's place; otherwise alone. Likewise a kernel line of a template that can end in
    a reduction (matmul) is measured together with the first later line that reads it when that is a
    reduce kernel line the template can fold into its kernel in that line's place. And the longest run
    (two lines or more) of consecutive pointwise and reduce kernel lines from a line that one row kernel
    can compute in their last line's place is measured as one step.
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
            row_run = _row_run(graph, schedule, position, joined)
            if row_run is not None:
                joined.update(row_run)
                steps.append(SearchStep(row_run, tuple(schedule.steps[index] for index in row_run)))
                continue
            reduction = _reduction_position(graph, roles, nodes, schedule, position)
            if reduction is None or reduction in joined:
                steps.append(SearchStep((position,), (line,)))
            else:
                joined.add(reduction)
                steps.append(SearchStep((position, reduction), (line, schedule.steps[reduction])))
    return steps


def _row_run(graph: OpGraph, schedule: Schedule, start: int, taken: set[int]) -> tuple[int, ...] | None:
    """The positions of the longest run of consecutive pointwise and reduce kernel lines from `start`, at
    most MAX_ROW_RUN and none in `taken`, whose ops one row kernel computes (on the run's own fragment);
    None when no run of two lines or more does."""

    def joinable(position: int) -> bool:
        line = schedule.steps[position]
        return isinstance(line, KernelLine) and line.template in ROW_RUN_TEMPLATES and position not in taken

    if not joinable(start):
        return None
    end = start
    while end + 1 < len(schedule.steps) and end + 1 - start < MAX_ROW_RUN and joinable(end + 1):
        end += 1
    for last in range(end, start, -1):
        lines = schedule.steps[start : last + 1]
        if not any(line.template == "reduce" for line in lines):
            continue
        try:
            _row_line(graph, lines)
        except (ScheduleError, UnsearchableFragment):
            continue
        return tuple(range(start, last + 1))
    return None


def _row_line(graph: OpGraph, lines: Sequence[KernelLine]) -> KernelLine:
    """The lines' ops as one row kernel with its default parameters, checked on their own fragment of
    `graph`; raises ScheduleError when it does not lower there, UnsearchableFragment as fragment_graph."""
    members = _in_graph_order(graph, [name for line in lines for name in line.nodes])
    fragment = fragment_graph(graph, members)
    row_line = default_kernel_line(fragment, ROW.name, members)
    lower_schedule(fragment, Schedule((row_line,)), "check", NameScope())
    return row_line


def _reduction_position(
    graph: OpGraph, roles: GraphRoles, nodes: dict[str, OpNode], schedule: Schedule, line_position: int
) -> int | None:
    """The position of the first line after a kernel line of a `reduces_output` template that reads one
    of its values, if that line is a reduce kernel the template can fold into its own: it reads them
    directly (not through a view), and both lines lower as one kernel. Nothing in between reads the first
    line's values, so it can move there.
    """
    line = schedule.steps[line_position]
    if not TEMPLATES[line.template].reduces_output:
        return None
    reader = _first_reader(graph, roles, nodes, schedule, line_position, line.nodes)
    if reader is None:
        return None
    position, later, reads = reader
    if not isinstance(later, KernelLine) or later.template != "reduce" or not reads <= set(line.nodes):
        return None
    try:
        _fused_reduction_line(graph, line, later, roles)
    except ScheduleError:
        return None
    return position


def _fused_reduction_line(
    graph: OpGraph, line: KernelLine, reduce_line: KernelLine, roles: GraphRoles | None = None
) -> KernelLine:
    """The two lines' ops as one kernel of the first line's template, with its default parameters for them."""
    return default_kernel_line(graph, line.template, _in_graph_order(graph, line.nodes + reduce_line.nodes), roles)


def _in_graph_order(graph: OpGraph, names: Sequence[str]) -> tuple[str, ...]:
    order = {node.name: index for index, node in enumerate(graph.nodes)}
    return tuple(sorted(names, key=order.__getitem__))


def _first_reader(
    graph: OpGraph, roles: GraphRoles, nodes: dict[str, OpNode], schedule: Schedule, position: int, values: Sequence[str]
) -> tuple[int, KernelLine | KeepLine, set[str]] | None:
    """The first line after `position` that reads `values` (or a view of them: views run where first needed,
    so reading one reads the value), with its position and which of the values and views it reads."""
    seen = set(values)
    for node in graph.nodes:
        if node.name in roles.implied and seen.intersection(node.input_refs()):
            seen.add(node.name)
    for later_position in range(position + 1, len(schedule.steps)):
        later = schedule.steps[later_position]
        members = later.nodes if isinstance(later, KernelLine) else (later.node,)
        reads = seen.intersection(ref for member in members for ref in nodes[member].input_refs())
        if reads:
            return later_position, later, reads
    return None


def _epilogue_position(
    graph: OpGraph, roles: GraphRoles, nodes: dict[str, OpNode], schedule: Schedule, kept_position: int
) -> int | None:
    """The position of the first line after the kept op that reads it, if that line is a pointwise kernel
    its template can take as the op's epilogue: it reads the op directly (not through a view), and the
    op with its ops lowers as one kernel. Nothing before that line reads the op, so the op can move there.
    """
    kept = schedule.steps[kept_position].node
    reader = _first_reader(graph, roles, nodes, schedule, kept_position, (kept,))
    if reader is None:
        return None
    position, line, reads = reader
    if not isinstance(line, KernelLine) or line.template != POINTWISE.name or reads != {kept}:
        return None
    try:
        default_kernel_line(graph, roles.roles[kept].template, _in_graph_order(graph, (kept, *line.nodes)), roles)
    except ScheduleError:
        return None
    return position


def step_alternatives(
    graph: OpGraph, step: SearchStep, *, tf32_templates: tuple[str, ...] = ()
) -> list[tuple[str, tuple[KernelLine | KeepLine, ...]]]:
    """Labelled alternatives for a search step: `line_alternatives` for a kernel line; for a kept op, its
    template's kernel (with the pointwise ops of a kernel line measured with it as epilogue) and that
    kernel's parameter variants, alternating with the variants of the pointwise line after the kept op;
    `_row_alternatives` for a run of pointwise and reduce lines.
    """
    if len(step.lines) == 1 and isinstance(step.lines[0], KernelLine):
        return line_alternatives(graph, step.lines[0], tf32_templates=tf32_templates)
    if isinstance(step.lines[0], KernelLine) and TEMPLATES[step.lines[0].template].reduces_output:
        return _reduction_alternatives(graph, step, tf32_templates)
    if isinstance(step.lines[0], KernelLine) and step.lines[0].template in ROW_RUN_TEMPLATES:
        return _row_alternatives(graph, step, tf32_templates)
    kept, *after = step.lines
    fragment = fragment_graph(graph, step.nodes)
    roles = classify(fragment)
    template = roles.roles[kept.node].template
    fused = default_kernel_line(fragment, template, _in_graph_order(fragment, step.nodes), roles)
    fused_variants = [(f"{template} {label}", (line,)) for label, line in _parameter_variants(fused, tf32_templates)]
    if after:
        # the pointwise line's own alternatives ("default", "pytorch", its variants), the op kept before it
        separate = [(label, (kept,) + lines) for label, lines in line_alternatives(fragment, after[0], tf32_templates=tf32_templates)]
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


def _reduction_alternatives(
    graph: OpGraph, step: SearchStep, tf32_templates: tuple[str, ...]
) -> list[tuple[str, tuple[KernelLine | KeepLine, ...]]]:
    """Alternatives for a kernel line measured with the reduce line after it: both as they are, the
    reduction folded into the first line's kernel ("fused reduction"), PyTorch's kernels, then the fused
    kernel's parameter variants alternating with each line's own alternatives (the other line as it is).
    """
    line, reduce_line = step.lines
    fragment = fragment_graph(graph, step.nodes)
    fused = _fused_reduction_line(fragment, line, reduce_line)
    fused_variants = [(f"fused reduction {label}", (variant,)) for label, variant in _parameter_variants(fused, tf32_templates)]
    first_variants = [
        (f"{line.template} {label}", lines + (reduce_line,))
        for label, lines in line_alternatives(fragment, line, tf32_templates=tf32_templates)
        if label not in ("default", "pytorch")
    ]
    reduce_variants = [
        (f"{reduce_line.template} {label}", (line,) + lines)
        for label, lines in line_alternatives(fragment, reduce_line, tf32_templates=tf32_templates)
        if label not in ("default", "pytorch")
    ]
    interleaved = [
        candidate
        for group in itertools.zip_longest(fused_variants, first_variants, reduce_variants)
        for candidate in group
        if candidate is not None
    ]
    candidates = [
        ("default", step.lines),
        ("fused reduction", (fused,)),
        ("pytorch", tuple(KeepLine(name) for name in step.nodes)),
    ]
    return _decodable(fragment, candidates + interleaved)


def _row_alternatives(
    graph: OpGraph, step: SearchStep, tf32_templates: tuple[str, ...]
) -> list[tuple[str, tuple[KernelLine | KeepLine, ...]]]:
    """Alternatives for a run of pointwise and reduce lines over the same rows: the lines as they are, all
    their ops in one row kernel ("row"), PyTorch's kernels, then the row kernel's parameter variants
    alternating with each line's own alternatives (the other lines as they are).
    """
    fragment = fragment_graph(graph, step.nodes)
    fused = _row_line(fragment, step.lines)
    row_variants = [(f"row {label}", (variant,)) for label, variant in _parameter_variants(fused, tf32_templates)]
    each_line_variants = [
        [
            # the line's template and first op tell apart the lines of the run
            (f"{line.template} {line.nodes[0]} {label}", step.lines[:index] + lines + step.lines[index + 1 :])
            for label, lines in line_alternatives(fragment, line, tf32_templates=tf32_templates)
            if label not in ("default", "pytorch")
        ]
        for index, line in enumerate(step.lines)
    ]
    interleaved = [
        candidate
        for group in itertools.zip_longest(row_variants, *each_line_variants)
        for candidate in group
        if candidate is not None
    ]
    candidates = [
        ("default", step.lines),
        (ROW.name, (fused,)),
        ("pytorch", tuple(KeepLine(name) for name in step.nodes)),
    ]
    return _decodable(fragment, candidates + interleaved)


def line_alternatives(
    graph: OpGraph, line: KernelLine, *, tf32_templates: tuple[str, ...] = ()
) -> list[tuple[str, tuple[KernelLine | KeepLine, ...]]]:
    """Labelled alternatives for one kernel line: the line itself, its parameter variants, PyTorch's
    kernels for all its ops, and (for anchored kernels) splits at the prologue and the epilogue.

    Every alternative is checked against the fragment's graph, so each one decodes. TF32 variants
    are left out unless the user's settings allow TF32 for the line's template (`tf32_templates`).
    """
    fragment = fragment_graph(graph, line.nodes)
    candidates: list[tuple[str, tuple[KernelLine | KeepLine, ...]]] = [("default", (line,))]
    candidates += [(label, (variant,)) for label, variant in _parameter_variants(line, tf32_templates)]
    candidates.append(("pytorch", tuple(KeepLine(name) for name in line.nodes)))
    candidates += _splits(fragment, line)
    return _decodable(fragment, candidates)


def _parameter_variants(line: KernelLine, tf32_templates: tuple[str, ...]) -> list[tuple[str, KernelLine]]:
    """The line with its template's search parameters, labelled by what changed (TF32 only for the templates in
    `tf32_templates`: those the user's PyTorch settings let compute float32 in TF32, see engine/search.py)."""
    template = TEMPLATES[line.template]
    specs = {spec.name: spec for spec in template.parameters}
    defaults = dict(line.params)
    variants = []
    for params in template.search_parameters(defaults):
        if params == defaults or (params.get("precision") == "tf32" and line.template not in tf32_templates):
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
