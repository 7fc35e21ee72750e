"""From graph to kernels: the default schedule for a graph, and lowering any schedule to kernel plans.

`default_schedule` is the compiler's own choice (partition plus each template's default parameters);
`lower_schedule` checks a script against the graph, naming the line and the choice that does not fit.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Sequence

from drtriton_lsp.compiler.aten_schemas import schema_of
from drtriton_lsp.compiler.elementwise import is_mutating
from drtriton_lsp.compiler.errors import ScheduleError
from drtriton_lsp.compiler.forward_source import is_bookkeeping
from drtriton_lsp.compiler.fusible import FUSIBLE_OPS, is_fusible
from drtriton_lsp.compiler.gather import GATHER_OPS, gathers_in_kernel, read_members
from drtriton_lsp.compiler.graph import OpGraph, OpNode, example_bytes
from drtriton_lsp.compiler.names import NameScope
from drtriton_lsp.compiler.partition import (
    Anchored,
    GroupStep,
    Pointwise,
    Role,
    broadcast_domain,
    broadcasts_to,
    group_inputs,
    group_outputs,
    partition_graph,
)
from drtriton_lsp.compiler.reshape_reads import RESHAPE_OPS, reshapes_in_kernel
from drtriton_lsp.compiler.schedule import KeptOp
from drtriton_lsp.compiler.script import KeepLine, KernelLine, Schedule, parse_schedule, print_schedule
from drtriton_lsp.compiler.templates import POINTWISE, ROW, TEMPLATES, anchor_of
from drtriton_lsp.compiler.templates.base import KernelPlan, int_per_dim
from drtriton_lsp.compiler.templates.copy import COPY_OPS
from drtriton_lsp.compiler.templates.pointwise import CHANNELS_LAST_ORDER
from drtriton_lsp.compiler.templates.row import RowGroupError, row_group

# export's own check that a traced `.to()` saw the dtype and device it expects; it returns
# nothing, and reading a value it would split a fused group, so the hybrid leaves it out
DROPPED_OPS = ("aten._assert_tensor_metadata.default",)
# how many op names a kernel's name lists before it says "and_more"
NAMED_OPS_PER_KERNEL = 4


@dataclass(frozen=True)
class GraphRoles:
    """What each op of a graph can be.

    implied: views, tuple reads and shape math: never scheduled, run where first needed.
    dropped: ops the hybrid leaves out. roles: the partition role of every other op.
    views: the ops that are tensor views (reported apart from compute kept in PyTorch): the implied ones, and the
    reshapes a kernel may read in place (a `keep` line of one runs PyTorch's reshape, a view where the strides allow).
    """

    implied: frozenset[str]
    dropped: frozenset[str]
    views: frozenset[str]
    roles: dict[str, Role]
    mutates: bool


def classify(graph: OpGraph) -> GraphRoles:
    """The role of every op: fusible pointwise, anchor of a template, implied, dropped, or kept."""
    readers = graph.users()
    nodes = {node.name: node for node in graph.nodes}
    mutates = any(is_mutating(node) for node in graph.nodes)
    dropped = frozenset(node.name for node in graph.nodes if node.op in DROPPED_OPS and node.name not in readers)
    implied: set[str] = set()
    views: set[str] = set()
    roles: dict[str, Role] = {}
    for node in graph.nodes:
        if node.name in dropped:
            continue
        if is_bookkeeping(node.op):
            implied.add(node.name)
        elif is_fusible(node, graph, graph_mutates=mutates):
            roles[node.name] = Pointwise(tuple(node.spec.shape))
        elif gathers_in_kernel(node, graph, {name for name, role in roles.items() if role is not None}):
            # an embedding lookup fuses like an elementwise op of its output's shape: the kernel gathers the rows
            roles[node.name] = Pointwise(tuple(node.spec.shape))
        elif not mutates and reshapes_in_kernel(node, graph, lambda value: _computed(value, nodes, implied, roles)):
            # so does a reshape PyTorch may copy: the kernel reads its source where the elements lie
            roles[node.name] = Pointwise(tuple(node.spec.shape))
            if _is_view(node):
                views.add(node.name)
        elif not mutates and _is_view(node):
            # with in-place ops in the graph a view's position matters, so it is then kept in order
            implied.add(node.name)
            views.add(node.name)
        else:
            anchored = None if mutates else anchor_of(node, graph)
            if anchored is None:
                roles[node.name] = None
            else:
                template, shape = anchored
                roles[node.name] = Anchored(template.name, shape.primary_input, shape.input_domain, shape.output_domain)
    for name in _reshapes_not_read_in_place(nodes, readers, dropped, roles):
        if _is_view(nodes[name]):  # PyTorch's reshape, where first needed, as any other view
            del roles[name]
            implied.add(name)
            views.add(name)
        else:  # a pixel shuffle: PyTorch's copy
            roles[name] = None
            views.discard(name)
    return GraphRoles(frozenset(implied), dropped, frozenset(views), roles, mutates)


def _reshapes_not_read_in_place(nodes: dict[str, OpNode], readers, dropped, roles: dict[str, Role]) -> list[str]:
    """The reshapes given a pointwise role that something other than a kernel that may read them in place reads: an op
    no template computes, a view, the graph's return, or an op anchored in a template that does not read reshapes."""

    def reads_in_place(reader: str, op: str) -> bool:
        role = roles.get(reader)
        return isinstance(role, Pointwise) or (
            isinstance(role, Anchored) and op in TEMPLATES[role.template].read_member_ops
        )

    return [
        name
        for name, role in roles.items()
        if role is not None
        and nodes[name].op in RESHAPE_OPS
        and not all(reads_in_place(reader, nodes[name].op) for reader in readers.get(name, []) if reader not in dropped)
    ]


def _computed(value: str, nodes: dict[str, OpNode], implied: set[str], roles: dict[str, Role]) -> bool:
    """Whether a kernel computes `value`, or the value a chain of views or tuple reads ending in `value` reads."""
    while value in implied and nodes[value].input_refs():
        value = nodes[value].input_refs()[0]
    return roles.get(value) is not None


# views whose schema does not say so: broadcast_tensors expands each input (no data moves)
UNANNOTATED_VIEWS = ("aten.broadcast_tensors.default",)


def _is_view(node: OpNode) -> bool:
    """Ops whose results alias their input (view, permute, expand, slice, split, ...): no data moves."""
    if node.op in UNANNOTATED_VIEWS:
        return True
    schema = schema_of(node.op)
    if schema is None or schema.is_mutable or len(schema.returns_alias) != 1:
        return False
    return schema.returns_alias[0] == "read"


def live_readers(graph: OpGraph, roles: GraphRoles) -> dict[str, list[str]]:
    """`graph.users()` without the ops the hybrid drops (export's metadata asserts after a cast): a kernel
    value that only they read is not stored."""
    return {value: [reader for reader in readers if reader not in roles.dropped] for value, readers in graph.users().items()}


# steps (kernels and kept ops) from which the default schedule may replay the forward as a CUDA graph. On the H200 a
# Python-launched step costs ~75-100 us of host time and the guards 30-150 us, against 10-20 us for the replay and its
# copies; written-back modules a call, plain -> replayed: a ResNet stage (10 steps) 0.91 -> 0.27 ms, an inverted
# residual (6) 0.71 -> 0.69, a depthwise-separable block (4) 0.44 -> 0.35, a ResNet stem (3) 0.94 -> 0.97 (the input
# and output copies cost more than the launches saved); benchmarks/results/host-graph-h200.json
REPLAY_FROM_STEPS = 4
# what `replays_by_default` weighs, fitted to the H200 runs above and to
# benchmarks/results/bench-h200-memory-bound-2026-12-03.md: a written-back step's host time (launch and its share of
# the guards), the rate at which the replay's copies move bytes (read plus written, the measured copy bandwidth), and
# the rate the steps' own traffic ran at (their device time was 1.6-2.5x that traffic at the copy rate). Counting
# steps alone, the replay took rotary_embedding's 4 steps from 0.26 to 0.57 ms (copying 539 MB of inputs and outputs
# cost more than the launches, which the GPU's own work hid) and distillation_loss's 5 from 0.36 to 0.41 ms, while
# it took squeeze_excitation's 6 from 0.70 to 0.25 ms; these constants keep the last and drop the first two
HOST_SECONDS_PER_STEP = 100e-6
COPY_BYTES_PER_SECOND = 4.2e12
STEP_BYTES_PER_SECOND = COPY_BYTES_PER_SECOND / 2


def default_schedule(graph: OpGraph) -> Schedule:
    """The compiler's schedule for `graph`: greedy fusion, each template's default parameters; replayed as a CUDA
    graph where that pays (`replays_by_default`)."""
    roles = classify(graph)
    readers = live_readers(graph, roles)
    nodes = {node.name: node for node in graph.nodes}
    scheduled = [node for node in graph.nodes if node.name not in roles.dropped]

    def default_role(node: OpNode) -> Role:
        role = roles.roles[node.name]
        # the op of a template kept by default stays a PyTorch call until a script or a search picks it
        return None if isinstance(role, Anchored) and TEMPLATES[role.template].kept_by_default(node, graph) else role

    steps: list[KernelLine | KeepLine] = []
    for step in partition_graph(scheduled, default_role, is_mutating, readers, roles.implied):
        if not isinstance(step, GroupStep):
            relaid = _read_channels_last(graph, nodes, nodes[step.node], readers)
            steps.append(KeepLine(step.node, "channels_last" if relaid else None))
            continue
        kept_reads = _read_members_kept_from(graph, nodes, readers, step)
        if kept_reads:
            # this kernel never computes their inputs (`gathers_in_kernel`, `reshapes_in_kernel`): they can run first
            steps.extend(KeepLine(member) for member in kept_reads)
            members = tuple(member for member in step.members if member not in kept_reads)
            if not members:
                continue
            step = replace(step, members=members)
        if not group_outputs(readers, step.members):
            continue  # nothing reads these values, so there is nothing to compute
        if step.template == POINTWISE.name and moves_data_only(nodes, step.members):
            # a kernel that only copies (an eval-mode dropout, a cast, a clone) computes nothing: PyTorch's own op
            # costs no more, and returns its input itself where it may (dropout, alias, detach, contiguous)
            steps.extend(KeepLine(member) for member in step.members)
            continue
        steps.append(_default_line(graph, nodes, roles, readers, step.template, step.members))
    kernels = [step for step in steps if isinstance(step, KernelLine)]
    computes_in_pytorch = any(isinstance(step, KeepLine) for step in steps)
    if computes_in_pytorch and kernels and all(moves_data_only(nodes, kernel.nodes) for kernel in kernels):
        # cat/stack/repeat kernels that would only copy what PyTorch computed: no value would come from Triton
        steps = [KeepLine(name) for step in steps for name in (step.nodes if isinstance(step, KernelLine) else (step.node,))]
    return Schedule(tuple(steps), replay=replays_by_default(steps, graph))


def replays_by_default(steps: Sequence[KernelLine | KeepLine], graph: OpGraph) -> bool:
    """Whether the forward of these steps replays as a CUDA graph when no script says: from REPLAY_FROM_STEPS steps,
    when the host time the replay saves exceeds what it adds (`replay_estimate`)."""
    steps = launched_steps(steps, graph)
    return _may_replay(steps, REPLAY_FROM_STEPS) and replay_estimate(steps, graph).pays


# on a GPU, where `optimize` times the module, the estimate only decides which form is verified first: from 2 steps,
# a forward whose estimated host time is at least this share of what the replay costs is verified replayed and timed
# both ways (the estimate is a fit that missed by 1.4-2x on host-bound modules: bench-h200-models-2026-12-04.md)
REPLAY_TIMED_FROM_RATIO = 0.5


def replay_worth_timing(steps: Sequence[KernelLine | KeepLine], graph: OpGraph) -> bool:
    """Whether a GPU run should measure this forward replayed as CUDA graphs as well as plainly: 2 steps or more,
    one a kernel, and the replay's estimated saving not far below its cost (REPLAY_TIMED_FROM_RATIO)."""
    steps = launched_steps(steps, graph)
    if not _may_replay(steps, 2):
        return False
    estimate = replay_estimate(steps, graph)
    return estimate.host_s >= REPLAY_TIMED_FROM_RATIO * (estimate.device_s + estimate.copy_s)


def launched_steps(steps: Sequence[KernelLine | KeepLine], graph: OpGraph) -> list[KernelLine | KeepLine]:
    """The steps that cost a launch: all but `keep` lines of reshapes (PyTorch's view where the strides allow, a
    host call of microseconds, as the views the forward takes where first needed)."""
    nodes = {node.name: node for node in graph.nodes}
    return [
        step for step in steps
        if not (isinstance(step, KeepLine) and nodes[step.node].op in RESHAPE_OPS and _is_view(nodes[step.node]))
    ]


def _may_replay(steps: Sequence[KernelLine | KeepLine], fewest: int) -> bool:
    """Whether a replay could save anything: at least `fewest` steps, one of them a kernel."""
    return len(steps) >= fewest and any(isinstance(step, KernelLine) for step in steps)


@dataclass(frozen=True)
class ReplayEstimate:
    """A forward's times per call at the example sizes, as `replays_by_default` weighs them. A plain call takes about
    the longer of host_s and device_s (the GPU's work hides the launches' host time); a replayed one, device_s plus
    copy_s (the inputs copied into the graph's buffers and the outputs out, each copy reading and writing its bytes)."""

    host_s: float
    device_s: float
    copy_s: float

    @property
    def pays(self) -> bool:
        return self.host_s > self.device_s + self.copy_s


def replay_estimate(steps: Sequence[KernelLine | KeepLine], graph: OpGraph) -> ReplayEstimate:
    """The host, device and copy times of these steps' forward (see ReplayEstimate), from the bytes at example sizes."""
    nodes = {node.name: node for node in graph.nodes}
    readers = graph.users()
    step_bytes = sum(_step_traffic(step, graph, nodes, readers) for step in steps)
    copied_bytes = 2 * (_bytes_of(graph, _user_inputs(graph)) + _bytes_of(graph, graph.output_values()))
    return ReplayEstimate(
        host_s=len(steps) * HOST_SECONDS_PER_STEP,
        device_s=step_bytes / STEP_BYTES_PER_SECOND,
        copy_s=copied_bytes / COPY_BYTES_PER_SECOND,
    )


def _step_traffic(step: KernelLine | KeepLine, graph: OpGraph, nodes: dict[str, OpNode], readers) -> int:
    """Bytes one step reads from outside itself and writes for later steps or the caller, at the example sizes."""
    members = step.nodes if isinstance(step, KernelLine) else (step.node,)
    return _bytes_of(graph, group_inputs(nodes, members)) + _bytes_of(graph, group_outputs(readers, members))


def _bytes_of(graph: OpGraph, values: Sequence[str]) -> int:
    specs = [graph.spec_of(value) for value in values]
    return sum(example_bytes(spec, graph.symbol_hints) for spec in specs if spec is not None)


def _user_inputs(graph: OpGraph) -> list[str]:
    return [graph_input.name for graph_input in graph.inputs if graph_input.kind == "user_input"]


def with_default_replay(script: str, graph: OpGraph) -> str:
    """A script of steps alone (a model's answer for `graph`) with the replay line the default schedule would give
    its steps."""
    schedule = parse_schedule(script)
    return print_schedule(Schedule(schedule.steps, schedule.replay or replays_by_default(schedule.steps, graph)))


def moves_data_only(nodes: dict[str, OpNode], members: tuple[str, ...]) -> bool:
    """Whether a kernel of these ops would only move data: copies and casts (the `copies` ops of the elementwise
    table), cat, stack or repeat (the copy template's ops), embedding lookups and reshapes, with nothing but such ops
    after them."""
    for member in members:
        op = nodes[member].op
        entry = FUSIBLE_OPS.get(op)
        if not (entry is not None and entry.copies) and op not in COPY_OPS + GATHER_OPS + RESHAPE_OPS:
            return False
    return True


def _read_members_kept_from(
    graph: OpGraph, nodes: dict[str, OpNode], readers: dict[str, list[str]], step: GroupStep
) -> tuple[str, ...]:
    """The read members (embedding lookups, reshapes) of a fused group that stay PyTorch calls: those its template
    does not read in place, and those whose value something outside the kernel reads (a read value is never
    stored)."""
    template, outside = TEMPLATES[step.template], group_outputs(readers, step.members)
    return tuple(
        member
        for member in read_members(nodes, step.members)
        if member in outside or not template.reads_in_place(nodes[member], step.members, graph)
    )


def _read_member_problem(
    graph: OpGraph, nodes: dict[str, OpNode], readers: dict[str, list[str]], template: str, members
) -> str:
    """Why a kernel line cannot read its read members in place ("" when it can, or has none)."""
    for member in read_members(nodes, members):
        lookup = nodes[member].op in GATHER_OPS
        what = "an embedding lookup" if lookup else "a reshape"
        if not TEMPLATES[template].reads_in_place(nodes[member], members, graph):
            readers_of_op = [name for name, other in TEMPLATES.items() if nodes[member].op in other.read_member_ops]
            named = f"{', '.join(readers_of_op[:-1])} and {readers_of_op[-1]}"
            how = "gathered" if lookup else "read in place"
            return f"{member} ({what}) is {how} only by {named} kernels" + (
                ", and not as a loss's target or weight" if template in readers_of_op else ""
            )
        if member in group_outputs(readers, members):
            return f"{member} ({what}) is read outside the kernel, and a value read in place is never stored"
    return ""


def default_kernel_line(
    graph: OpGraph, template_name: str, members: tuple[str, ...], roles: GraphRoles | None = None
) -> KernelLine:
    """`members` (in graph order) as one kernel of the template, with its default parameters.

    roles: `classify(graph)`, when the caller has it. Raises ScheduleError when the template cannot
    compute the members as one kernel.
    """
    nodes = {node.name: node for node in graph.nodes}
    roles = roles or classify(graph)
    return _default_line(graph, nodes, roles, live_readers(graph, roles), template_name, members)


def _default_line(graph, nodes, roles, readers, template_name, members) -> KernelLine:
    template = TEMPLATES[template_name]
    plan = _plan(graph, nodes, roles, readers, template_name, members, {}, "", "")
    params = template.default_parameters(plan, graph)
    return KernelLine(template_name, tuple(members), tuple((spec.name, params[spec.name]) for spec in template.parameters))


# kept ops that may run on a channels-last input: 2-d convolutions, whose input is their first argument
CHANNELS_LAST_OPS = ("aten.convolution.default", "aten.conv2d.default", "aten.conv2d.padding")


def takes_channels_last(graph: OpGraph, node: OpNode) -> bool:
    """Whether a kept `node` may run channels-last: a 2-d convolution over a batch of images (a 4-d input)."""
    source = node.args[0] if node.args else None
    spec = graph.spec_of(source["ref"]) if isinstance(source, dict) and "ref" in source else None
    return node.op in CHANNELS_LAST_OPS and spec is not None and spec.rank == 4


def _read_channels_last(
    graph: OpGraph, nodes: dict[str, OpNode], node: OpNode, readers: dict[str, list[str]]
) -> bool:
    """Whether a kept 2-d convolution runs channels-last by default: every reader of its result permutes it to
    [N, H, W, C], which the channels-last result is already, in memory order. Measured on the H200
    (benchmarks/results/schedule-ab-h200-2026-12-05.md): a ConvNeXt block's bf16 depthwise 7x7 convolution took
    1336 us in PyTorch's NCHW kernel and 285 us channels-last (plus 44 us to convert its input)."""
    if not takes_channels_last(graph, node) or not readers.get(node.name):
        return False

    def permutes_to_channels_last(reader: OpNode | None) -> bool:  # None: the graph's output reads it
        dims = int_per_dim(reader.args[1], 4) if reader is not None and reader.op == "aten.permute.default" else None
        return dims is not None and tuple(dim % 4 for dim in dims) == CHANNELS_LAST_ORDER

    return all(permutes_to_channels_last(nodes.get(reader)) for reader in readers[node.name])


def _check_keep_layout(graph: OpGraph, node: OpNode, layout: str, number: int) -> None:
    """A `keep ... layout=channels_last` line names a convolution over a batch of 2-d images (a 4-d input)."""
    if not takes_channels_last(graph, node):
        raise ScheduleError(
            f"line {number}: layout={layout} applies to a 2-d convolution of a batch of images, not {node.name} ({node.op})",
            "write 'keep <op>' for it",
        )


def lower_schedule(graph: OpGraph, schedule: Schedule, prefix: str, module_scope: NameScope) -> list[KernelPlan | KeptOp]:
    """The program's steps in run order: kernel plans, kept ops, and implied ops where first needed.

    Raises ScheduleError when the script does not fit the graph (unknown or repeated op, an op
    missing, a template that cannot compute an op, a step reading a value not yet computed).
    """
    roles = classify(graph)
    readers = live_readers(graph, roles)
    nodes = {node.name: node for node in graph.nodes}
    schedulable = [node.name for node in graph.nodes if node.name not in roles.implied and node.name not in roles.dropped]
    line_of: dict[str, int] = {}
    for number, step in enumerate(schedule.steps, start=1):
        for name in step.nodes if isinstance(step, KernelLine) else (step.node,):
            if name not in nodes:
                raise ScheduleError(f"line {number}: the graph has no op {name!r}", "use the op names of this graph")
            if name in roles.implied or name in roles.dropped:
                raise ScheduleError(
                    f"line {number}: {name} ({nodes[name].op}) is a view or bookkeeping op and is never scheduled",
                    "leave it out; it runs where its value is first needed",
                )
            if name in line_of:
                raise ScheduleError(f"line {number}: {name} is already scheduled on line {line_of[name]}", "schedule each op once")
            line_of[name] = number
    unread = {name for name in schedulable if name not in line_of and not _computes_something(name, readers, roles)}
    missing = [name for name in schedulable if name not in line_of and name not in unread]
    if missing:
        raise ScheduleError(
            f"ops not scheduled: {', '.join(missing)}", "give every op a 'kernel' or 'keep' line"
        )

    available = {graph_input.name for graph_input in graph.inputs}
    program: list[KernelPlan | KeptOp] = []
    emitted_implied: set[str] = set()
    mutating_positions = [position for position, name in enumerate(schedulable) if is_mutating(nodes[name])]
    position_of = {name: position for position, name in enumerate(schedulable)}

    def require(value: str, number: int, reader: str) -> None:
        if value in available:
            return
        if value in roles.implied and value not in emitted_implied:
            for ref in nodes[value].input_refs():
                require(ref, number, value)
            program.append(KeptOp(value, nodes[value].op, bookkeeping=True))
            emitted_implied.add(value)
            available.add(value)
            return
        raise ScheduleError(
            f"line {number}: {reader} reads {value}, which no earlier line computes",
            "order the lines so every value is computed before it is read",
        )

    for number, step in enumerate(schedule.steps, start=1):
        members = step.nodes if isinstance(step, KernelLine) else (step.node,)
        _check_mutation_order(members, number, position_of, mutating_positions, schedulable, line_of)
        if isinstance(step, KeepLine):
            for ref in nodes[step.node].input_refs():
                require(ref, number, step.node)
            if step.layout is not None:
                _check_keep_layout(graph, nodes[step.node], step.layout, number)
            # a kept reshape is PyTorch's view where the strides allow it, as an implied one is: not compute
            bookkeeping = step.node in roles.views
            program.append(KeptOp(step.node, nodes[step.node].op, bookkeeping=bookkeeping, layout=step.layout))
            available.add(step.node)
            continue
        ordered = tuple(sorted(members, key=position_of.__getitem__))
        if ordered != members:
            raise ScheduleError(
                f"line {number}: a kernel lists its ops in graph order ({','.join(ordered)})", "reorder the ops"
            )
        for ref in group_inputs(nodes, members):
            require(ref, number, next(m for m in members if ref in nodes[m].input_refs()))
        plan = _plan(graph, nodes, roles, readers, step.template, members, step.parameters, prefix, number)
        base_name = _kernel_base_name(prefix, [nodes[member] for member in members], plan.anchor)
        plan = KernelPlan(
            **{**plan.__dict__, "wrapper": module_scope.fresh(base_name), "kernel": module_scope.fresh(f"{base_name}_kernel")}
        )
        program.append(plan)
        available.update(members)
    for ref in graph.output_values():
        require(ref, len(schedule.steps) + 1, "the graph's return")
    return program


def _computes_something(name: str, readers: dict[str, list[str]], roles: GraphRoles) -> bool:
    """Whether leaving the op out would change the result: it is read, or it mutates, or it is kept."""
    return bool(readers.get(name)) or roles.mutates or roles.roles.get(name) is None


def _check_mutation_order(members, number, position_of, mutating_positions, schedulable, line_of) -> None:
    """Steps keep their graph order relative to every in-place op (which may change what they read)."""
    for member in members:
        for mutating in mutating_positions:
            other = schedulable[mutating]
            if other == member or other not in line_of:
                continue
            before_in_graph = position_of[member] < mutating
            before_in_script = number < line_of[other]
            if before_in_graph != before_in_script:
                raise ScheduleError(
                    f"line {number}: {member} must run {'before' if before_in_graph else 'after'} the in-place op {other}",
                    "keep steps in graph order around ops that write into their inputs",
                )


def _pointwise_domain(roles, readers, members, fail) -> tuple:
    """The domain a pointwise kernel of `members` runs over: the one output shape every member's broadcasts to. A
    member of a smaller shape is computed for every element of it (partition._inlines_into), so nothing outside the
    kernel may read it."""
    domain = broadcast_domain({roles.roles[member].domain for member in members})
    if domain is None:
        raise fail("its ops have output shapes that do not broadcast to one", "a pointwise kernel's ops share one output shape")
    for member in members:
        outside = [reader for reader in readers.get(member, []) if reader not in members]
        if roles.roles[member].domain != domain and outside:
            raise fail(
                f"{member} has a smaller shape than the kernel's and is read by {outside[0]} outside it",
                "a kernel stores only values of its own shape: give the smaller op a kernel of its own",
            )
    return domain


def _plan(graph, nodes, roles, readers, template_name, members, params, prefix, number) -> KernelPlan:
    """The kernel plan for `members` under a template; raises ScheduleError if it cannot compute them."""
    def fail(problem: str, hint: str) -> ScheduleError:
        return ScheduleError(f"line {number}: kernel {template_name}: {problem}", hint)

    anchors = [member for member in members if not isinstance(roles.roles[member], Pointwise)]
    problem = _read_member_problem(graph, nodes, readers, template_name, members)
    if problem:
        raise fail(problem, "keep it in PyTorch (a keep line before the kernel)")
    if template_name == POINTWISE.name:
        if anchors:
            raise fail(f"{anchors[0]} ({nodes[anchors[0]].op}) is not elementwise", "keep it, or use its template")
        domain = _pointwise_domain(roles, readers, members, fail)
        anchor, prologue, epilogue = None, (), tuple(members)
        reduction, reduced, reduced_epilogue = None, set(), ()
    elif template_name == ROW.name:
        anchor, domain = _row_members(graph, nodes, roles, members, fail)
        prologue, epilogue = (), ()
        reduction, reduced, reduced_epilogue = None, set(), ()
    else:
        reduction, reduced = _output_reduction(nodes, roles, TEMPLATES[template_name], members, anchors)
        reduced_epilogue = tuple(member for member in members if member in reduced and member != reduction)
        anchors = [member for member in anchors if member != reduction]
        if len(anchors) != 1:
            raise fail(
                f"needs exactly one {template_name} op, got {', '.join(anchors) or 'none'}",
                "put one anchor op and the elementwise ops around it in a kernel",
            )
        anchor = anchors[0]
        role = roles.roles[anchor]
        if not isinstance(role, Anchored) or role.template != template_name:
            reason = TEMPLATES[template_name].unsupported_reason(nodes[anchor], graph)
            raise fail(
                f"{anchor} ({nodes[anchor].op}) cannot be computed by this template{f': {reason}' if reason else ''}",
                "keep it in PyTorch",
            )
        ancestors = _ancestors_within(nodes, anchor, set(members))
        prologue = tuple(member for member in members if member in ancestors)
        epilogue = tuple(member for member in members if member not in (anchor, *ancestors, *reduced))
        if prologue:
            if role.primary_input is None or role.primary_input not in prologue:
                raise fail("this op takes no prologue", "compute its inputs in a separate kernel")
            for member in prologue:
                # the primary input is in the anchor's input shape; an op before it may be smaller, computed for every
                # element (read only inside the kernel: checked below)
                shape = roles.roles[member].domain
                fits = shape == role.input_domain if member == role.primary_input else broadcasts_to(shape, role.input_domain)
                if not fits:
                    raise fail(f"prologue op {member} is not in the anchor's input shape", "split it into its own kernel")
                outside = [r for r in readers.get(member, []) if r not in members and not (r == anchor)]
                if outside or (anchor in readers.get(member, []) and member != role.primary_input):
                    raise fail(
                        f"prologue op {member} is also read outside the anchor's primary input",
                        "store it from its own kernel instead",
                    )
        if epilogue and role.output_domain is None:
            raise fail(f"{anchor} allows no epilogue", "compute the following ops in a separate kernel")
        for member in epilogue:
            if roles.roles[member].domain != role.output_domain:
                raise fail(f"epilogue op {member} is not in the anchor's output shape", "split it into its own kernel")
        domain = role.output_domain if role.output_domain is not None else ()
        if reduction is not None:
            _check_reduced_members(nodes, roles, anchor, epilogue, reduction, reduced_epilogue, fail)
    outputs = group_outputs(readers, members)
    if not outputs:
        raise fail("nothing reads what it computes", "leave these ops out of the script")
    plan = KernelPlan(
        template=template_name,
        wrapper="",
        kernel="",
        nodes=tuple(members),
        ops=tuple(nodes[member].op for member in members),
        anchor=anchor,
        prologue=prologue,
        epilogue=epilogue,
        domain=tuple(domain),
        inputs=tuple(group_inputs(nodes, members)),
        outputs=tuple(outputs),
        params=dict(params),
        reduction=reduction,
        reduced_epilogue=reduced_epilogue,
    )
    if reduction is not None:
        problem = TEMPLATES[template_name].reduction_problem(plan, graph)
        if problem:
            raise fail(problem, "fold it in a separate reduce kernel")
    problem = TEMPLATES[template_name].parameter_problem(plan, graph)
    if problem:
        raise fail(problem, "choose another value (docs/COMPILER.md lists each template's parameters)")
    return plan


def _output_reduction(nodes, roles, template, members, anchors) -> tuple[str | None, set[str]]:
    """The reduction a line of a `reduces_output` template ends in (its second anchor, an op of the reduce
    template), and the members computed from it (itself included); (None, empty) for any other line."""
    if not template.reduces_output or len(anchors) != 2:
        return None, set()
    reduction = anchors[1]
    role = roles.roles[reduction]
    if not isinstance(role, Anchored) or role.template != "reduce":
        return None, set()
    member_set = set(members)
    after = {member for member in members if reduction in _ancestors_within(nodes, member, member_set)}
    return reduction, after | {reduction}


def _check_reduced_members(nodes, roles, anchor, epilogue, reduction, reduced_epilogue, fail) -> None:
    """The reduction folds a value of the kernel's output tile, and the ops after it read only the reduced values."""
    role = roles.roles[reduction]
    tile_values = (anchor, *epilogue)
    if role.primary_input not in tile_values:
        raise fail(
            f"{reduction} reduces {role.primary_input}, which is not {anchor} or an epilogue op on its output tile",
            "a kernel reduces the output tile it computes",
        )
    if role.input_domain != roles.roles[anchor].output_domain:
        raise fail(f"{reduction} does not reduce a value of {anchor}'s output shape", "fold it in a separate reduce kernel")
    for member in reduced_epilogue:
        if roles.roles[member].domain != role.output_domain:
            raise fail(f"op {member} after the reduction is not in {reduction}'s output shape", "split it into its own kernel")
        tile_reads = [ref for ref in nodes[member].input_refs() if ref in tile_values]
        if tile_reads:
            raise fail(
                f"op {member} after the reduction reads {tile_reads[0]}, a value of the unreduced tile",
                "compute it in a separate kernel",
            )


def _row_members(graph, nodes, roles, members, fail) -> tuple[str, tuple]:
    """A row kernel's first reduction (it names the kernel) and its rows' shape; raises what `fail` makes
    when one kernel cannot compute the members row by row."""
    for member in members:
        role = roles.roles[member]
        if not isinstance(role, Pointwise) and not (isinstance(role, Anchored) and role.template == "reduce"):
            raise fail(
                f"{member} ({nodes[member].op}) is neither elementwise nor a reduction the reduce template computes",
                "keep it, or give it a kernel of its own",
            )
    try:
        group = row_group(graph, members)
    except RowGroupError as error:
        raise fail(error.problem, error.hint) from None
    return next(iter(group.reductions)), group.domain


def _ancestors_within(nodes: dict[str, OpNode], start: str, members: set[str]) -> set[str]:
    found: set[str] = set()
    pending = [start]
    while pending:
        for ref in nodes[pending.pop()].input_refs():
            if ref in members and ref not in found:
                found.add(ref)
                pending.append(ref)
    return found


def short_name(op: str) -> str:
    """"gelu" for aten.gelu.default; the elementwise table's name where it has one."""
    entry = FUSIBLE_OPS.get(op)
    if entry is not None:
        return entry.short_name
    parts = op.split(".")
    return parts[1].lstrip("_") if len(parts) == 3 else "op"


def _kernel_base_name(prefix: str, members: list[OpNode], anchor: str | None) -> str:
    """`<prefix>_gelu` for one op, `<prefix>_fused_gelu_mul_add` for several; the anchor named first."""
    ordered = sorted(members, key=lambda member: member.name != anchor) if anchor else members
    short_names: list[str] = []
    for member in ordered:
        name = short_name(member.op)
        if name not in short_names:
            short_names.append(name)
    listed = "_".join(short_names[:NAMED_OPS_PER_KERNEL])
    if len(short_names) > NAMED_OPS_PER_KERNEL:
        listed += "_and_more"
    return f"{prefix}_{listed}" if len(members) == 1 else f"{prefix}_fused_{listed}"
