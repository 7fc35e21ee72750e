"""Capture: `torch.export` a Task's model into the flat `OpGraph` the compiler consumes.

Runs inside a worker process (it executes user code). Every tensor dimension of the example
inputs is offered to export as `Dim.AUTO`, so the graph says which sizes are free (symbols)
and which the model fixes; verification uses that to try odd sizes safely. When export fails
with free sizes, or gives sizes that do not hold at other input sizes (`sizes_that_do_not_hold`),
the model is exported again at the example sizes, and the capture says so.
In-place ops that write only memory the forward allocated become functional ops
(worker/in_place.py), and user inputs take the forward's parameter names.
"""

from __future__ import annotations

import inspect
import logging
import operator
import re
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

import torch
import torch.utils._pytree as pytree
from torch.export import Dim

from drtriton_lsp.compiler import aten_schemas
from drtriton_lsp.compiler.graph import GraphInput, OpGraph, OpNode, TensorSpec
from drtriton_lsp.errors import CaptureError
from drtriton_lsp.worker.composite_ops import open_composite_ops
from drtriton_lsp.worker.conv_bias import move_conv_bias_past_channels_last_permute
from drtriton_lsp.worker.copied_views import fold_copies_into_reshapes
from drtriton_lsp.worker.decomposed_norms import fold_decomposed_norms
from drtriton_lsp.worker.in_place import functional_program, functionalize_in_place_ops, writes_in_place
from drtriton_lsp.worker.op_schemas import encoded_constant, schemas_of
from drtriton_lsp.worker.picked_log_probs import fold_picked_log_probs

DTYPE_NAMES = {
    torch.float32: "float32",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float64: "float64",
    torch.int64: "int64",
    torch.int32: "int32",
    torch.int16: "int16",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.bool: "bool",
}


def dtype_name(dtype: torch.dtype) -> str:
    return DTYPE_NAMES.get(dtype, str(dtype).removeprefix("torch."))


@dataclass(frozen=True)
class Export:
    """An exported program, and why its sizes are fixed when they are.

    static_because: "" when export was offered every input size as free (it may still have fixed some); otherwise
    the failure of that export, after which the program was exported again at the example sizes only.
    """

    program: Any
    static_because: str = ""


def export_program(model: torch.nn.Module, args: tuple, task_file: Path | None) -> tuple[Any, bool]:
    """Export with every input dimension free to vary; fall back to fixed shapes.

    Returns (exported_program, dynamic) where dynamic says whether free dims were offered to export.
    Raises CaptureError naming the task line that export could not trace.
    """
    export = export_with_fallback(model, args, task_file)
    return export.program, not export.static_because


def export_with_fallback(model: torch.nn.Module, args: tuple, task_file: Path | None, free_sizes: bool = True) -> Export:
    """Export with every input dimension free to vary (`Dim.AUTO`); if that fails, again at the example sizes.
    free_sizes=False: at the example sizes only (a fraction of the time).

    Raises CaptureError naming the task line that export could not trace at all.
    """
    static_because = ""
    if free_sizes:
        dynamic_shapes = tuple(
            {axis: Dim.AUTO for axis in range(arg.dim())} if isinstance(arg, torch.Tensor) else None
            for arg in args
        )
        try:
            program = torch.export.export(model, _fresh(args), dynamic_shapes=dynamic_shapes, strict=False)
            static_because = sizes_that_do_not_hold(program)
            if not static_because:
                return Export(program)
        except Exception as error:  # noqa: BLE001 - any failure here is retried without free dims below
            static_because = f"{type(error).__name__}: {_first_line(error)}"[:300]
    try:
        return Export(torch.export.export(model, _fresh(args), strict=False), static_because)
    except Exception as error:  # noqa: BLE001 - every export failure becomes a CaptureError
        raise capture_error_from(error, task_file) from error


def sizes_that_do_not_hold(program: Any) -> str:
    """Where the exported graph's sizes are wrong at other input sizes ("" where none is found).

    torch.export can record a size as a constant that is not one: after `max_pool2d` of a free height that pools to
    1 at the example, torch 2.11-2.13 give the next pointwise op a height of 1 for every input size, and kernels
    compiled from that graph are wrong everywhere else. So the graph is run again on fake tensors (sizes only, no
    memory, no compute) with every free size moved by 3 within its range, and each op's sizes are compared with
    what the graph says they are at those sizes."""
    import sympy
    from torch._subclasses.fake_tensor import FakeTensorMode

    graph_module = program.graph_module
    placeholders = [node for node in graph_module.graph.nodes if node.op == "placeholder"]
    moved: dict[Any, int] = {}
    for node in placeholders:
        value = node.meta.get("val")
        for size in value.shape if isinstance(value, torch.Tensor) else ():
            if isinstance(size, torch.SymInt) and isinstance(size.node.expr, sympy.Symbol) and size.node.hint:
                symbol, hint = size.node.expr, int(size.node.hint)
                bounds = program.range_constraints.get(symbol)
                upper = _finite_or_none(bounds.upper) if bounds is not None else None
                moved[symbol] = hint + 3 if upper is None or hint + 3 <= upper else hint

    def at_moved_sizes(shape: Any) -> list[int]:
        return [int(size.node.expr.xreplace(moved)) if isinstance(size, torch.SymInt) else int(size) for size in shape]

    disagreements: list[str] = []

    class SizeChecker(torch.fx.Interpreter):
        def run_node(self, node: torch.fx.Node) -> Any:
            result = super().run_node(node)
            if node.op == "call_function" and not disagreements:
                recorded = pytree.tree_leaves(node.meta.get("val"))
                computed = pytree.tree_leaves(result)
                for expected, actual in zip(recorded, computed):
                    if isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor):
                        if at_moved_sizes(expected.shape) != list(actual.shape):
                            disagreements.append(
                                f"`{node.name}` has sizes {list(actual.shape)} where the exported graph says "
                                f"{at_moved_sizes(expected.shape)}"
                            )
            return result

    fake_tensor_log = logging.getLogger("torch._subclasses.fake_tensor")
    level = fake_tensor_log.level
    fake_tensor_log.setLevel(logging.CRITICAL)  # an op that fails below is logged there with its whole stack
    try:
        with FakeTensorMode(allow_non_fake_inputs=True):
            values = [_fake_like(node.meta.get("val"), at_moved_sizes) for node in placeholders]
            SizeChecker(graph_module).run(*values)
    except Exception:  # noqa: BLE001 - a graph the check cannot run is kept as exported (verification tries odd sizes)
        return ""
    finally:
        fake_tensor_log.setLevel(level)
    if not disagreements:
        return ""
    return f"its sizes do not hold at other input sizes: {disagreements[0]}"[:300]


def _fake_like(value: Any, sizes_of: Callable[[Any], list[int]]) -> Any:
    """A new tensor (fake, in the caller's FakeTensorMode) like a placeholder's value at the sizes `sizes_of` gives."""
    if isinstance(value, torch.Tensor):
        return torch.empty(sizes_of(value.shape), dtype=value.dtype, device=value.device)
    if isinstance(value, torch.SymInt):
        return sizes_of([value])[0]
    return value


def _fresh(args: tuple) -> tuple:
    """The arguments with each tensor replaced by a new tensor object over the same memory: a failed export leaves
    its dynamic-size marks on the tensor objects it was given (torch 2.13), which would make the retry fail too."""
    return pytree.tree_map_only(torch.Tensor, lambda tensor: tensor.detach(), args)


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else ""


def capture_error_from(error: BaseException, task_file: Path | None) -> CaptureError:
    """Turn an export failure into a message that names the user's line."""
    line = _task_line_of(error, task_file)
    summary = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    if "data-dependent" in str(error) or "GuardOnDataDependent" in type(error).__name__:
        message = "torch.export cannot trace control flow that depends on tensor values"
        hint = (
            "rewrite the branch with torch.where / torch.cond, or move it outside forward; "
            "drtriton needs a forward whose ops do not depend on the data"
        )
    else:
        message = f"torch.export could not trace the model: {type(error).__name__}: {summary[:300]}"
        hint = "drtriton needs a forward that torch.export can capture; see the line named here"
    return CaptureError(message, hint, line=line)


def _task_line_of(error: BaseException, task_file: Path | None) -> int | None:
    if task_file is None:
        return None
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and current not in chain:
        chain.append(current)
        current = current.__cause__ or current.__context__
    for exc in chain:
        frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == task_file]
        if frames:
            return frames[-1].lineno
    pattern = re.compile(rf'File "{re.escape(str(task_file))}", line (\d+)')
    for exc in chain:
        matches = pattern.findall(str(exc))
        if matches:
            return int(matches[-1])
    return None


@dataclass(frozen=True)
class Capture:
    """A captured graph and its ops' schemas (as `aten_schemas.remember` reads them); static_note: "" when export was
    offered free sizes, else a sentence for the report saying that export with free sizes failed and the graph holds
    the example sizes only (see `Export.static_because`)."""

    graph: OpGraph
    schemas: dict[str, Any]
    static_note: str = ""


def capture_graph(model: torch.nn.Module, args: tuple, task_file: Path | None = None, free_sizes: bool = True) -> OpGraph:
    """Export `model` on `args` and flatten the result into an OpGraph."""
    return capture(model, args, task_file, free_sizes).graph


def capture(model: torch.nn.Module, args: tuple, task_file: Path | None = None, free_sizes: bool = True) -> Capture:
    """Export `model` on `args` (see `export_with_fallback`), open composite ops export keeps whole (recurrent
    cells, prelu: worker/composite_ops.py), write in-place ops on fresh values as functional ops
    (worker/in_place.py), fold decomposed norms back (worker/decomposed_norms.py), copies made to be viewed into
    reshapes (worker/copied_views.py), log-probabilities picked at targets into cross-entropies
    (worker/picked_log_probs.py) and a convolution's bias past its permute to [N, H, W, C] (worker/conv_bias.py), and
    flatten it into an OpGraph."""
    export = export_with_fallback(model, args, task_file, free_sizes)
    exported = open_composite_ops(export.program)
    functionalize_in_place_ops(exported.graph_module)
    if writes_in_place(exported.graph):
        exported = functional_program(exported) or exported
    fold_decomposed_norms(exported.graph_module)
    fold_copies_into_reshapes(exported.graph_module)
    fold_picked_log_probs(exported.graph_module)
    move_conv_bias_past_channels_last_permute(exported.graph_module)
    graph = graph_from_exported(exported, task_file, user_input_names(model, args))
    schemas = schemas_of(graph)
    aten_schemas.remember(schemas)  # this process can plan what it captured, as a caller given the graph
    note = ""
    if export.static_because:
        note = (
            f"torch.export could not leave the input sizes free ({export.static_because}); captured at the example "
            "sizes, so the kernels are specialised to them and verified at them only"
        )
    return Capture(graph, schemas, note)


def user_input_names(model: torch.nn.Module, args: tuple) -> list[str | None]:
    """The forward parameter each of export's user inputs stands for, in export's order (None: keep export's name).

    Export names placeholders in its own style (`def forward(self, A)` gives a placeholder `a`), so they are matched
    to the forward's positional parameters by position: each argument gives one user input per pytree leaf. An
    argument that is a container (a list of tensors) keeps export's names (`pair_0`, `pair_1`).
    """
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    parameters = []
    for parameter in inspect.signature(model.forward).parameters.values():
        if parameter.kind not in positional:
            break
        parameters.append(parameter.name)
    names: list[str | None] = []
    for index, argument in enumerate(args):
        leaves, structure = pytree.tree_flatten(argument)
        named = index < len(parameters) and structure.is_leaf()
        names += [parameters[index] if named else None] * len(leaves)
    return names


def graph_from_exported(exported: Any, task_file: Path | None, input_names: list[str | None] | None = None) -> OpGraph:
    """The exported program as an OpGraph; input_names: the forward parameter each user input stands for (see
    `user_input_names`; None, or a None entry: export's placeholder name)."""
    signature = exported.graph_signature
    user_inputs = [spec.arg.name for spec in signature.input_specs if spec.kind.name == "USER_INPUT"]
    # matched by position only when the counts agree: otherwise export's names stand
    named = input_names is not None and len(input_names) == len(user_inputs)
    targets = {placeholder: name for placeholder, name in zip(user_inputs, input_names or []) if named and name}
    kind_of: dict[str, tuple[str, str]] = {}
    for spec in signature.input_specs:
        kind = spec.kind.name
        if kind == "PARAMETER":
            kind_of[spec.arg.name] = ("parameter", spec.target)
        elif kind == "BUFFER":
            kind_of[spec.arg.name] = ("buffer", spec.target)
        elif kind in ("CONSTANT_TENSOR", "CUSTOM_OBJ", "TOKEN"):
            kind_of[spec.arg.name] = ("constant_tensor", spec.target or spec.arg.name)
        else:
            kind_of[spec.arg.name] = ("user_input", targets.get(spec.arg.name, spec.arg.name))

    inputs: list[GraphInput] = []
    nodes: list[OpNode] = []
    outputs: list[Any] = []
    returns_tuple = True
    symbols: dict[str, int] = {}

    for node in exported.graph.nodes:
        if node.op == "placeholder":
            kind, target = kind_of.get(node.name, ("user_input", node.name))
            if kind == "constant_tensor":
                raise CaptureError(
                    "forward creates a tensor constant (e.g. torch.tensor(...) inside forward)",
                    "register it in __init__ with self.register_buffer(...) so it becomes a module buffer",
                )
            inputs.append(GraphInput(node.name, kind, target, _spec_of(node.meta.get("val"), symbols)))
        elif node.op == "call_function":
            nodes.append(
                OpNode(
                    name=node.name,
                    op=_op_name(node.target),
                    args=tuple(_encode(a) for a in node.args),
                    kwargs={k: _encode(v) for k, v in node.kwargs.items()},
                    outputs=_output_specs(node.meta.get("val"), symbols),
                    source_line=_stack_line(node.meta.get("stack_trace"), task_file),
                )
            )
        elif node.op == "output":
            returned = node.args[0]
            outputs = [_encode(v) for v in returned]
            returns_tuple = len(returned) != 1

    ranges = {}
    for symbol, value_range in exported.range_constraints.items():
        name = str(symbol)
        if name in symbols:
            ranges[name] = [_finite_or_none(value_range.lower), _finite_or_none(value_range.upper)]
    return OpGraph(inputs, nodes, outputs, returns_tuple, symbol_hints=symbols, symbol_ranges=ranges)


def _finite_or_none(bound: Any) -> int | None:
    try:
        return int(bound)
    except (OverflowError, TypeError, AttributeError, ValueError):
        return None  # sympy's infinities (including torch's int_oo) mean "unbounded"


def _op_name(target: Callable) -> str:
    if target is operator.getitem:
        return "getitem"
    name = str(target)
    return name.removeprefix("torch.ops.")


def _spec_of(value: Any, symbols: dict[str, int]) -> TensorSpec | None:
    if not isinstance(value, torch.Tensor):
        return None
    dims: list[int | str] = []
    for size in value.shape:
        if isinstance(size, torch.SymInt):
            expression = size.node.expr
            name = str(expression)
            if expression.is_number:
                dims.append(int(expression))
                continue
            hint = size.node.hint
            if hint is not None:
                symbols[name] = int(hint)
            dims.append(name)
        else:
            dims.append(int(size))
    return TensorSpec(tuple(dims), dtype_name(value.dtype))


def _output_specs(value: Any, symbols: dict[str, int]) -> tuple[TensorSpec, ...]:
    if isinstance(value, (list, tuple)):
        return tuple(_spec_of(v, symbols) or TensorSpec((), "none") for v in value)
    spec = _spec_of(value, symbols)
    return (spec,) if spec is not None else (TensorSpec((), "none"),)


def _encode(value: Any) -> Any:
    if isinstance(value, torch.fx.Node):
        return {"ref": value.name}
    if isinstance(value, (list, tuple)):
        return {"list": [_encode(v) for v in value]}
    if isinstance(value, torch.SymInt):
        return {"symint": str(value.node.expr)}
    if isinstance(value, (torch.dtype, torch.device, torch.layout, torch.memory_format)):
        return encoded_constant(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise CaptureError(
        f"unsupported argument in the exported graph: {type(value).__name__}",
        "this construct is not supported yet; keep the module's forward to tensor ops",
    )


def _stack_line(stack_trace: str | None, task_file: Path | None) -> int | None:
    if not stack_trace or task_file is None:
        return None
    pattern = re.compile(rf'File "{re.escape(str(task_file))}", line (\d+)')
    matches = pattern.findall(stack_trace)
    return int(matches[-1]) if matches else None
