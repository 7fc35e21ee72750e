"""Source text of the hybrid forward: the graph's ops in order, fused groups as wrapper calls.

Ops left in PyTorch become exact ATen calls (`torch.ops.aten.linear.default(x, drtriton_module_tensors["fc.weight"])`),
so the hybrid computes what the captured graph computes, at any size the graph allows; views and shape reads are
written as the tensor methods that call the same ATen overloads (`x.view([-1, 64])`), which cost the host less.
"""

from __future__ import annotations

import keyword
import math
from typing import Any

from drtriton_lsp.compiler.graph import GraphInput, OpGraph, OpNode
from drtriton_lsp.compiler.schedule import KeptOp
from drtriton_lsp.compiler.templates.base import KernelPlan
from drtriton_lsp.errors import DrtritonError

INDENT = "    "
# the hybrid forward's keyword parameter through which the written dispatch passes the module tensors its guards
# read and checked ({target: tensor}), so that the kernels use exactly those and the forward reads none again
MODULE_TENSORS = "drtriton_module_tensors"

# Symbolic integer math that export records as Python operators (e.g. "<built-in function mul>").
BINARY_OPERATORS = {
    "add": "+", "sub": "-", "mul": "*", "truediv": "/", "floordiv": "//", "mod": "%", "pow": "**",
    "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">=", "and_": "&", "or_": "|",
}
UNARY_OPERATORS = {"neg": "-", "pos": "+", "not_": "not "}
SHAPE_AND_TUPLE_OPS = (
    "getitem", "aten.sym_size.int", "aten.sym_numel.default", "aten.sym_stride.int", "aten.sym_storage_offset.default",
)


# Views and shape reads written as a method of their first argument: the method dispatches to the very same ATen
# overload with the same arguments, and Python's method binding costs the host less than an OpOverload call
# (`benchmarks/launch_cost.py` times both). A forward holds many of these.
METHOD_CALLS = {
    "aten.view.default": "view",
    "aten.reshape.default": "reshape",
    "aten.unsqueeze.default": "unsqueeze",
    "aten.squeeze.dim": "squeeze",
    "aten.squeeze.dims": "squeeze",
    "aten.permute.default": "permute",
    "aten.expand.default": "expand",
    "aten.transpose.int": "transpose",
    "aten.t.default": "t",
    "aten.select.int": "select",
    "aten.narrow.default": "narrow",
    "aten.flatten.using_ints": "flatten",
    "aten.split.Tensor": "split",
    "aten.chunk.default": "chunk",
    "aten.unbind.int": "unbind",
    "aten.detach.default": "detach",
    "aten.sym_size.int": "size",
    "aten.sym_numel.default": "numel",
    "aten.sym_stride.int": "stride",
    "aten.sym_storage_offset.default": "storage_offset",
}


class UnsupportedGraphError(DrtritonError):
    """The graph holds something the hybrid forward cannot spell as Python."""


def builtin_operator_name(op: str) -> str | None:
    """"mul" for "<built-in function mul>", None for anything else."""
    if op.startswith("<built-in function ") and op.endswith(">"):
        return op.removeprefix("<built-in function ").removesuffix(">")
    return None


def is_bookkeeping(op: str) -> bool:
    """Ops that only read tuples or shapes: kept, but not counted as compute left in PyTorch."""
    return op in SHAPE_AND_TUPLE_OPS or builtin_operator_name(op) is not None


class ForwardWriter:
    """Renders graph values and steps as Python expressions inside the hybrid forward."""

    def __init__(self, graph: OpGraph, forward_params: list[str], has_self: bool, *, converter: str | None = None):
        self.inputs: dict[str, GraphInput] = {graph_input.name: graph_input for graph_input in graph.inputs}
        tensor_params = [
            graph_input.target
            for graph_input in graph.inputs
            if graph_input.kind == "user_input" and graph_input.spec is not None
        ]
        self.device_expression = f"{tensor_params[0]}.device" if tensor_params else None
        # converter: the function giving a channels-last convolution its input so laid out; with one, values may be
        # channels-last, and a view of one may not exist (a reshape does)
        self.converter = converter
        self.relaid = converter is not None
        for graph_input in graph.inputs:
            if graph_input.kind == "user_input" and graph_input.target not in forward_params:
                raise UnsupportedGraphError(
                    f"graph input {graph_input.target!r} is not a forward parameter ({', '.join(forward_params)})",
                    "pass the forward's parameter names, in order, as forward_params",
                )
            if graph_input.kind in ("parameter", "buffer") and not has_self:
                raise UnsupportedGraphError(
                    f"the graph reads {graph_input.kind} {graph_input.target!r} but the target has no self",
                    "compile module targets with has_self=True",
                )
            if graph_input.kind not in ("parameter", "buffer", "user_input"):
                raise UnsupportedGraphError(
                    f"the graph reads a {graph_input.kind} ({graph_input.target!r}), which the forward cannot name",
                    "register tensors the forward uses as module buffers",
                )

    def value(self, encoded: Any) -> str:
        """Python source for an encoded argument (see OpNode)."""
        if isinstance(encoded, dict):
            if "ref" in encoded:
                return self._reference(encoded["ref"])
            if "list" in encoded:
                return "[" + ", ".join(self.value(item) for item in encoded["list"]) + "]"
            if "dtype" in encoded:
                return f"torch.{encoded['dtype']}"
            if "layout" in encoded:
                return f"torch.{encoded['layout']}"
            if "memory_format" in encoded:
                return f"torch.{encoded['memory_format']}"
            if "device" in encoded:
                # the device the inputs live on at run time, not the one used at capture
                return self.device_expression or f"torch.device({encoded['device']!r})"
            raise UnsupportedGraphError(
                f"cannot write the graph argument {encoded!r} as Python",
                "this construct is not supported by the compiler yet",
            )
        if isinstance(encoded, float) and not math.isfinite(encoded):
            return f'float("{encoded}")'
        return repr(encoded)

    def _reference(self, name: str) -> str:
        graph_input = self.inputs.get(name)
        if graph_input is None:
            return name
        if graph_input.kind == "user_input":
            return graph_input.target
        return f"{MODULE_TENSORS}[{graph_input.target!r}]"

    def module_tensor_read(self, graph_input: GraphInput) -> str:
        """The module tensor read from `self` by its path, as PyTorch finds it (a parameter or buffer)."""
        path = graph_input.target.split(".")
        if all(part.isidentifier() and not keyword.iskeyword(part) for part in path):
            return "self." + graph_input.target
        getter = "get_parameter" if graph_input.kind == "parameter" else "get_buffer"
        return f"self.{getter}({graph_input.target!r})"

    def call(self, node: OpNode, layout: str | None = None) -> str:
        """The op as one Python expression: an exact ATen call, an index, or integer math.

        layout="channels_last": the first argument (a convolution's input) goes through the converter first (a
        tensor already so laid out is passed as it is).
        """
        arguments = [self.value(argument) for argument in node.args]
        if layout is not None:
            arguments[0] = f"{self.converter}({arguments[0]})"
        if node.op == "getitem":
            return f"{arguments[0]}[{arguments[1]}]"
        operator_name = builtin_operator_name(node.op)
        if operator_name in BINARY_OPERATORS and len(arguments) == 2:
            return f"{arguments[0]} {BINARY_OPERATORS[operator_name]} {arguments[1]}"
        if operator_name in UNARY_OPERATORS and len(arguments) == 1:
            return f"{UNARY_OPERATORS[operator_name]}{arguments[0]}"
        if node.op.startswith("<"):
            raise UnsupportedGraphError(
                f"op {node.name} calls {node.op}, which the hybrid forward cannot write as Python",
                "keep symbolic shape arithmetic to + - * // % in forward",
            )
        arguments += [f"{key}={self.value(value)}" for key, value in node.kwargs.items()]
        op = "aten.reshape.default" if self.relaid and node.op == "aten.view.default" else node.op
        if op in METHOD_CALLS and node.args and isinstance(node.args[0], dict) and "ref" in node.args[0]:
            return f"{arguments[0]}.{METHOD_CALLS[op]}({', '.join(arguments[1:])})"
        return f"torch.ops.{op}({', '.join(arguments)})"

    def fused_call(self, kernel: KernelPlan) -> str:
        arguments = ", ".join(self._reference(value) for value in kernel.inputs)
        return f"{', '.join(kernel.outputs)} = {kernel.wrapper}({arguments})"


def _is_tensor_of_rank(graph: OpGraph, value: Any, rank: int) -> bool:
    spec = graph.spec_of(value["ref"]) if isinstance(value, dict) and "ref" in value else None
    return spec is not None and spec.rank == rank


def render_forward(
    graph: OpGraph,
    steps: list[KernelPlan | KeptOp],
    *,
    name: str,
    forward_params: list[str],
    has_self: bool,
    converter: str | None = None,
) -> str:
    """`def name(self, ..., *, drtriton_module_tensors=None)`: every step of the schedule in order, then the graph's
    outputs. The module's parameters and buffers come in `drtriton_module_tensors` ({path: tensor}, what the written
    dispatch's guards read); called without it, the forward reads them from `self` first.

    converter: the name of the function that lays out a channels-last convolution's input (needed when a step has a
    layout).
    """
    if converter is None and any(isinstance(step, KeptOp) and step.layout for step in steps):
        raise ValueError("a step with a layout needs the converter's name")
    if MODULE_TENSORS in forward_params:
        raise UnsupportedGraphError(
            f"the forward has a parameter named {MODULE_TENSORS}, the name the generated forward keeps for the module's "
            "tensors", "rename that parameter",
        )
    writer = ForwardWriter(graph, forward_params, has_self, converter=converter)
    readers = graph.users()
    parameters = (["self"] if has_self else []) + list(forward_params) + [f"*, {MODULE_TENSORS}=None"]
    lines = [f"def {name}({', '.join(parameters)}):"]
    module_tensors = [graph_input for graph_input in graph.inputs if graph_input.kind in ("parameter", "buffer")]
    if module_tensors:
        lines += [
            f"{INDENT}if {MODULE_TENSORS} is None:  # called directly, not through the written dispatch",
            f"{INDENT * 2}{MODULE_TENSORS} = {{",
            *(f"{INDENT * 3}{graph_input.target!r}: {writer.module_tensor_read(graph_input)},"
              for graph_input in module_tensors),
            f"{INDENT * 2}}}",
        ]
    nodes = {node.name: node for node in graph.nodes}
    for step in steps:
        if isinstance(step, KernelPlan):
            lines.append(INDENT + writer.fused_call(step))
        elif step.node in readers:
            lines.append(f"{INDENT}{step.node} = {writer.call(nodes[step.node], step.layout)}")
        elif not step.bookkeeping:
            lines.append(INDENT + writer.call(nodes[step.node], step.layout))
    returned = [writer.value(output) for output in graph.outputs]
    if writer.relaid:
        # values computed from a channels-last convolution are laid out so; the caller gets PyTorch's default layout
        returned = [
            f"{value}.contiguous()" if _is_tensor_of_rank(graph, output, 4) else value
            for value, output in zip(returned, graph.outputs)
        ]
    if not graph.returns_tuple:
        lines.append(f"{INDENT}return {returned[0]}")
    elif len(returned) == 1:
        lines.append(f"{INDENT}return ({returned[0]},)")
    else:
        lines.append(f"{INDENT}return ({', '.join(returned)})")
    return "\n".join(lines) + "\n"
