"""compile_graph: an OpGraph and a schedule script in, a hybrid program out (Triton kernels + a PyTorch forward).

The public entry point of the embedded compiler; see `CompiledProgram` for what callers get.
"""

from __future__ import annotations

from dataclasses import dataclass

from drtriton_lsp.compiler.channels_last import conversion_source
from drtriton_lsp.compiler.elementwise import DeviceHelpers
from drtriton_lsp.compiler.forward_source import render_forward
from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.compiler.names import NameScope, identifier_from
from drtriton_lsp.compiler.planner import classify, default_schedule, lower_schedule, moves_data_only
from drtriton_lsp.compiler.schedule import KeptOp
from drtriton_lsp.compiler.script import parse_schedule, print_schedule
from drtriton_lsp.compiler.templates import TEMPLATES
from drtriton_lsp.compiler.templates.base import KernelPlan, RenderContext


@dataclass(frozen=True)
class CompiledProgram:
    """A hybrid program for one graph.

    kernel_block: top-level Python source: @triton.jit kernels, their launch wrappers, and the
      hybrid forward function (no imports: see required_imports).
    forward_function: name of the hybrid forward defined in kernel_block.
    kernels: names of the launched @triton.jit kernels (device helpers they call are not listed).
    replaced_ops: one ATen op name per graph op now computed in Triton.
    kept_ops: one ATen op name per compute op left in PyTorch (views, getitem and shape math not counted).
    view_ops: one ATen op name per view the forward takes in PyTorch (no data moves).
    schedule: the schedule script the program was decoded from.
    tf32: some kernel computes float32 matmuls in TF32 because its schedule says precision=tf32.
    kept_copies: the kept ops (among kept_ops) a template could compute but that only move data (copies, casts,
      eval-mode dropout, cat): the default schedule keeps them when a kernel would compute nothing else.
    replay: the schedule ends in `replay cuda_graph`: the written-back dispatch replays the forward as CUDA graphs.
    """

    kernel_block: str
    forward_function: str
    kernels: tuple[str, ...]
    replaced_ops: tuple[str, ...]
    kept_ops: tuple[str, ...]
    schedule: str
    view_ops: tuple[str, ...] = ()
    tf32: bool = False
    kept_copies: tuple[str, ...] = ()
    replay: bool = False
    required_imports: tuple[str, ...] = ("import torch", "import triton", "import triton.language as tl")


def compile_graph(
    graph: OpGraph,
    *,
    prefix: str,
    forward_params: list[str],
    has_self: bool,
    schedule: str | None = None,
) -> CompiledProgram:
    """Lower the graph as `schedule` says (a script; None: the compiler's default schedule).

    prefix: snake_case name that starts every generated top-level name.
    forward_params: the forward's parameter names in order (without self); user inputs map to
      them by name. has_self: module target (parameters passed by the written dispatch, else read as self.<path>)
      or function target.
    The same graph and script always give byte-identical source. Raises ScheduleError for a script
    that does not parse or does not fit the graph.
    """
    parsed = default_schedule(graph) if schedule is None else parse_schedule(schedule)
    prefix = identifier_from(prefix)
    module_scope = NameScope()
    forward_name = module_scope.fresh(f"{prefix}_triton_forward")
    helpers = DeviceHelpers(prefix, module_scope)
    steps = lower_schedule(graph, parsed, prefix, module_scope)
    # a channels-last convolution's input goes through one conversion function (a no-op when it already is)
    relaid = any(isinstance(step, KeptOp) and step.layout for step in steps)
    converter = module_scope.fresh(f"{prefix}_to_channels_last") if relaid else None
    conversion = [conversion_source(converter, module_scope.fresh(f"{converter}_kernel"))] if converter else []
    context = RenderContext(graph, helpers, tuple(sorted(module_scope.taken)))
    plans = [step for step in steps if isinstance(step, KernelPlan)]
    kernel_sources = [TEMPLATES[plan.template].render(plan, context) for plan in plans]
    forward_source = render_forward(
        graph, steps, name=forward_name, forward_params=forward_params, has_self=has_self, converter=converter
    )
    roles = classify(graph)
    kept = [step for step in steps if isinstance(step, KeptOp)]
    nodes = {node.name: node for node in graph.nodes}
    return CompiledProgram(
        kernel_block="\n\n".join(helpers.sources() + conversion + kernel_sources + [forward_source]),
        forward_function=forward_name,
        kernels=tuple(plan.kernel for plan in plans),
        replaced_ops=tuple(op for plan in plans for op in plan.ops),
        kept_ops=tuple(step.op for step in kept if not step.bookkeeping),
        view_ops=tuple(step.op for step in kept if step.node in roles.views),
        schedule=print_schedule(parsed),
        tf32=any(plan.params.get("precision") == "tf32" for plan in plans),
        kept_copies=tuple(
            step.op
            for step in kept
            if roles.roles.get(step.node) is not None
            and step.node not in roles.views
            and moves_data_only(nodes, (step.node,))
        ),
        replay=parsed.replay,
    )
