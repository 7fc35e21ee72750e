"""The flat op graph the compiler works on: what `torch.export` captured, as plain data.

Built by `drtriton_lsp.worker.capture` inside a worker process and sent to the parent as JSON,
so every field here is JSON-friendly (no torch objects): the parent never imports user code.
`example_bytes` sizes a value at the example inputs (memory caps, the roofline, the replay's cost).

Shapes are lists whose entries are ints or symbol names (str): a symbol is a dimension that
`torch.export` proved free (it may take other sizes, e.g. the batch); an int is fixed. Two
dimensions with the same symbol are equal at run time, which is what makes broadcast patterns
exact: a `1` against a symbol is a broadcast, a symbol against the same symbol is not.
"""

from __future__ import annotations

import ast
import math
import operator
from dataclasses import asdict, dataclass, field
from typing import Any, Union

Dim = Union[int, str]


@dataclass(frozen=True)
class TensorSpec:
    """Shape and dtype of one tensor value ("float32", "float16", "bfloat16", "int64", ...)."""

    shape: tuple[Dim, ...]
    dtype: str

    @property
    def rank(self) -> int:
        return len(self.shape)


@dataclass(frozen=True)
class GraphInput:
    """A value that enters the graph.

    kind: "parameter" | "buffer" | "user_input" | "constant_tensor".
    target: for parameters and buffers the dotted attribute path on the module ("fc.weight"),
    for user inputs the forward argument's name.
    spec: None for a non-tensor user input (its value was fixed at capture).
    """

    name: str
    kind: str
    target: str
    spec: TensorSpec | None


@dataclass(frozen=True)
class OpNode:
    """One ATen call, e.g. op="aten.gelu.default".

    args/kwargs hold literals (int, float, bool, None, str) and these encodings:
    {"ref": NAME} for a graph value, {"list": [...]} for a list or tuple,
    {"dtype": "float32"}, {"device": "cpu"}, {"layout": "..."}, {"memory_format": "..."}.
    outputs: one spec per returned tensor (most ops return one). Multi-output ops are read
    through "getitem" nodes: op="getitem", args=[{"ref": producer}, index].
    source_line: line in the Task module that produced the op, when known.
    """

    name: str
    op: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    outputs: tuple[TensorSpec, ...]
    source_line: int | None = None

    @property
    def spec(self) -> TensorSpec:
        """The single output of a one-output op."""
        return self.outputs[0]

    def input_refs(self) -> list[str]:
        """Names of the graph values this op reads, in argument order, nested lists included."""
        found: list[str] = []
        _collect_refs(list(self.args) + list(self.kwargs.values()), found)
        return found


@dataclass
class OpGraph:
    """A whole captured forward: inputs, ops in execution (topological) order, outputs.

    outputs: encoded like op arguments ({"ref": NAME} or literals), in return order.
    returns_tuple: whether forward returned a tuple/list rather than a single value.
    symbol_hints: the value each shape symbol had in the example inputs.
    symbol_ranges: inclusive [low, high] per symbol (high None = unbounded).
    """

    inputs: list[GraphInput]
    nodes: list[OpNode]
    outputs: list[Any]
    returns_tuple: bool
    symbol_hints: dict[str, int] = field(default_factory=dict)
    symbol_ranges: dict[str, list[int | None]] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "OpGraph":
        def spec(raw: dict[str, Any] | None) -> TensorSpec | None:
            if raw is None:
                return None
            return TensorSpec(shape=tuple(raw["shape"]), dtype=raw["dtype"])

        inputs = [
            GraphInput(name=i["name"], kind=i["kind"], target=i["target"], spec=spec(i["spec"]))
            for i in data["inputs"]
        ]
        nodes = [
            OpNode(
                name=n["name"],
                op=n["op"],
                args=tuple(n["args"]),
                kwargs=dict(n["kwargs"]),
                outputs=tuple(spec(o) for o in n["outputs"]),
                source_line=n.get("source_line"),
            )
            for n in data["nodes"]
        ]
        return cls(
            inputs=inputs,
            nodes=nodes,
            outputs=list(data["outputs"]),
            returns_tuple=bool(data["returns_tuple"]),
            symbol_hints=dict(data.get("symbol_hints", {})),
            symbol_ranges=dict(data.get("symbol_ranges", {})),
        )

    def spec_of(self, name: str) -> TensorSpec | None:
        """Spec of any graph value (input or single-output op) by name."""
        for graph_input in self.inputs:
            if graph_input.name == name:
                return graph_input.spec
        for node in self.nodes:
            if node.name == name:
                return node.spec if len(node.outputs) == 1 else None
        raise KeyError(name)

    def output_values(self) -> list[str]:
        """The graph values the forward returns (inside returned lists too), each once, in return order."""
        refs: list[str] = []
        _collect_refs(self.outputs, refs)
        return list(dict.fromkeys(refs))

    def users(self) -> dict[str, list[str]]:
        """For each value name, the names of the ops that read it (graph outputs as "<output>")."""
        readers: dict[str, list[str]] = {}
        for node in self.nodes:
            for ref in node.input_refs():
                readers.setdefault(ref, []).append(node.name)
        output_refs: list[str] = []
        _collect_refs(self.outputs, output_refs)
        for ref in output_refs:
            readers.setdefault(ref, []).append("<output>")
        return readers


def _collect_refs(values: list[Any], found: list[str]) -> None:
    for value in values:
        if isinstance(value, dict) and "ref" in value:
            found.append(value["ref"])
        elif isinstance(value, dict) and "list" in value:
            _collect_refs(value["list"], found)
        elif isinstance(value, (list, tuple)):
            _collect_refs(list(value), found)


DTYPE_BYTES = {
    "float64": 8, "int64": 8, "float32": 4, "int32": 4, "float16": 2, "bfloat16": 2, "int16": 2, "int8": 1,
    "uint8": 1, "bool": 1,
}  # fmt: skip


def example_bytes(spec: TensorSpec, hints: dict[str, int]) -> int:
    """Bytes of a tensor at the example sizes (`OpGraph.symbol_hints`); a dtype not in DTYPE_BYTES counts 8 a value."""
    elements = math.prod(example_dim(dim, hints) for dim in spec.shape)
    return elements * DTYPE_BYTES.get(spec.dtype, 8)


def example_dim(dim: Dim, hints: dict[str, int]) -> int:
    """A dimension at the example sizes: an int, a symbol, or a size expression export wrote (`2*s0`,
    `((s1 - 1)//2) + 1`, `Max(1, s0)`); anything else counts as the largest example size."""
    if isinstance(dim, int):
        return dim
    try:
        return max(int(_evaluate(ast.parse(dim, mode="eval").body, hints)), 0)
    except (SyntaxError, ValueError, KeyError, ZeroDivisionError):
        return max(hints.values(), default=1)


_OPERATORS = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.FloorDiv: operator.floordiv,
    ast.Div: operator.truediv, ast.Mod: operator.mod,
}  # fmt: skip
_FUNCTIONS = {"Max": max, "Min": min, "floor": math.floor, "ceiling": math.ceil, "FloorDiv": operator.floordiv}


def _evaluate(node: ast.AST, hints: dict[str, int]) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name):
        return hints[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
        return _OPERATORS[type(node.op)](_evaluate(node.left, hints), _evaluate(node.right, hints))
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_evaluate(node.operand, hints)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in _FUNCTIONS:
        return _FUNCTIONS[node.func.id](*(_evaluate(argument, hints) for argument in node.args))
    raise ValueError(f"not a size expression: {ast.dump(node)}")
