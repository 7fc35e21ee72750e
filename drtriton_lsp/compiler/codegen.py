"""compile_graph: an OpGraph in, a hybrid program out (fused Triton kernels + a PyTorch forward).

The public entry point of the embedded compiler; see `CompiledProgram` for what callers get.
"""

from __future__ import annotations

from dataclasses import dataclass

from drtriton_lsp.compiler.elementwise import ELEMENTWISE_OPS, DeviceHelpers, is_fusible, is_mutating
from drtriton_lsp.compiler.forward_source import kept_step, render_forward
from drtriton_lsp.compiler.graph import OpGraph, OpNode
from drtriton_lsp.compiler.kernel_source import render_fused_kernel
from drtriton_lsp.compiler.names import NameScope, identifier_from
from drtriton_lsp.compiler.partition import GroupStep, group_inputs, group_outputs, partition_graph
from drtriton_lsp.compiler.schedule import FusedKernel, FusionSchedule, KeptOp

# export's own check that a traced `.to()` saw the dtype and device it expects; it returns
# nothing, and reading a value it would split a fused group, so the hybrid leaves it out
DROPPED_OPS = ("aten._assert_tensor_metadata.default",)
# how many op names a kernel's name lists before it says "and_more"
NAMED_OPS_PER_KERNEL = 4


@dataclass(frozen=True)
class CompiledProgram:
    """A hybrid program for one graph.

    kernel_block: top-level Python source: @triton.jit kernels, their launch wrappers, and the
      hybrid forward function (no imports: see required_imports).
    forward_function: name of the hybrid forward defined in kernel_block.
    kernels: names of the launched @triton.jit kernels (device helpers they call are not listed).
    replaced_ops: one ATen op name per graph op now computed in Triton.
    kept_ops: one ATen op name per compute op left in PyTorch (getitem / shape math not counted).
    schedule: the fusion plan as text, one line per kernel or kept op.
    """

    kernel_block: str
    forward_function: str
    kernels: tuple[str, ...]
    replaced_ops: tuple[str, ...]
    kept_ops: tuple[str, ...]
    schedule: str
    required_imports: tuple[str, ...] = ("import torch", "import triton", "import triton.language as tl")


def compile_graph(graph: OpGraph, *, prefix: str, forward_params: list[str], has_self: bool) -> CompiledProgram:
    """Fuse the graph's elementwise ops into Triton kernels; keep everything else in PyTorch.

    prefix: snake_case name that starts every generated top-level name.
    forward_params: the forward's parameter names in order (without self); user inputs map to
      them by name. has_self: module target (parameters read as self.<path>) or function target.
    """
    prefix = identifier_from(prefix)
    module_scope = NameScope()
    forward_name = module_scope.fresh(f"{prefix}_triton_forward")
    helpers = DeviceHelpers(prefix, module_scope)
    schedule = plan_schedule(graph, prefix, module_scope)
    module_names = tuple(sorted(module_scope.taken))

    kernel_sources = [render_fused_kernel(graph, kernel, helpers, module_names) for kernel in schedule.kernels]
    forward_source = render_forward(
        graph, schedule, name=forward_name, forward_params=forward_params, has_self=has_self
    )
    kernel_block = "\n\n".join(helpers.sources() + kernel_sources + [forward_source])
    return CompiledProgram(
        kernel_block=kernel_block,
        forward_function=forward_name,
        kernels=tuple(kernel.kernel for kernel in schedule.kernels),
        replaced_ops=tuple(op for kernel in schedule.kernels for op in kernel.ops),
        kept_ops=tuple(kept.op for kept in schedule.kept),
        schedule=schedule.render(),
    )


def plan_schedule(graph: OpGraph, prefix: str, module_scope: NameScope) -> FusionSchedule:
    """Partition the graph and name each kernel; names are taken from `module_scope`."""
    readers = graph.users()
    dropped = {
        node.name for node in graph.nodes if node.op in DROPPED_OPS and node.name not in readers
    }
    scheduled = [node for node in graph.nodes if node.name not in dropped]
    readers = {value: [reader for reader in names if reader not in dropped] for value, names in readers.items()}
    nodes = {node.name: node for node in scheduled}
    graph_mutates = any(is_mutating(node) for node in scheduled)

    steps: list[FusedKernel | KeptOp] = []
    for step in partition_graph(
        scheduled, lambda node: is_fusible(node, graph, graph_mutates=graph_mutates), is_mutating
    ):
        if not isinstance(step, GroupStep):
            steps.append(kept_step(nodes[step.node]))
            continue
        outputs = group_outputs(readers, step.members)
        if not outputs:
            continue  # nothing reads these values, so there is nothing to compute
        base_name = _kernel_base_name(prefix, [nodes[member] for member in step.members])
        steps.append(
            FusedKernel(
                wrapper=module_scope.fresh(base_name),
                kernel=module_scope.fresh(f"{base_name}_kernel"),
                nodes=step.members,
                ops=tuple(nodes[member].op for member in step.members),
                domain=step.domain,
                inputs=tuple(group_inputs(nodes, step.members)),
                outputs=tuple(outputs),
            )
        )
    return FusionSchedule(tuple(steps))


def _kernel_base_name(prefix: str, members: list[OpNode]) -> str:
    """`<prefix>_gelu` for one op, `<prefix>_fused_gelu_mul_add` for several."""
    short_names: list[str] = []
    for member in members:
        short_name = ELEMENTWISE_OPS[member.op].short_name
        if short_name not in short_names:
            short_names.append(short_name)
    listed = "_".join(short_names[:NAMED_OPS_PER_KERNEL])
    if len(short_names) > NAMED_OPS_PER_KERNEL:
        listed += "_and_more"
    return f"{prefix}_{listed}" if len(members) == 1 else f"{prefix}_fused_{listed}"
