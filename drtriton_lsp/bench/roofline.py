"""Work and traffic of a captured graph: bytes that must move and matmul FLOPs, from the OpGraph alone.

The bench divides these by measured times to place each problem against the GPU's ceilings
(copy bandwidth, the library's matmul rate). Pure data: no torch, no user code.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from drtriton_lsp.compiler.graph import DTYPE_BYTES, OpGraph, TensorSpec

# Issue #6's targets: memory-bound kernels at >= 85 % of copy bandwidth, matmul-class at >= 70 % of the library.
BANDWIDTH_TARGET = 0.85
LIBRARY_TARGET = 0.70

# ATen ops whose work is a matrix product (the "matmul class": FLOPs = 2*M*N*K per batch).
MATMUL_OPS = {
    "aten.mm.default",
    "aten.addmm.default",
    "aten.bmm.default",
    "aten.baddbmm.default",
    "aten.linear.default",
    "aten.matmul.default",
    "aten.einsum.default",
}


@dataclass(frozen=True)
class MatmulShape:
    """One matrix product: `batch` independent (m x k) @ (k x n) products in `dtype`."""

    batch: int
    m: int
    n: int
    k: int
    dtype: str

    @property
    def flops(self) -> int:
        return 2 * self.batch * self.m * self.n * self.k


@dataclass(frozen=True)
class GraphWork:
    """minimum_bytes: every graph input read once plus every output written once (None if a size is unknown).

    matmuls: the matrix products, one per matmul-class op (empty when there are none);
    matmul_flops: their FLOPs summed, None when some product's shape could not be read.
    """

    minimum_bytes: int | None
    matmul_class: bool
    matmuls: tuple[MatmulShape, ...]
    matmul_flops: int | None

    def to_json(self) -> dict[str, Any]:
        return {
            "minimum_bytes": self.minimum_bytes,
            "matmul_class": self.matmul_class,
            "matmuls": [asdict(shape) for shape in self.matmuls],
            "matmul_flops": self.matmul_flops,
        }


def graph_work(graph: OpGraph) -> GraphWork:
    """Bytes and matmul FLOPs of a graph, at the sizes it was captured with (its symbol hints)."""
    matmul_nodes = [node for node in graph.nodes if node.op in MATMUL_OPS]
    shapes = [matmul_shape(graph, node.op, node.args) for node in matmul_nodes]
    known = tuple(shape for shape in shapes if shape is not None)
    complete = len(known) == len(shapes)
    return GraphWork(
        minimum_bytes=minimum_bytes(graph),
        matmul_class=bool(matmul_nodes),
        matmuls=known,
        matmul_flops=sum(shape.flops for shape in known) if matmul_nodes and complete else None,
    )


def minimum_bytes(graph: OpGraph) -> int | None:
    """Bytes of every tensor input (parameters and buffers too) read once, and of every output written once."""
    specs = [graph_input.spec for graph_input in graph.inputs if graph_input.spec is not None]
    specs += [graph.spec_of(name) for name in graph.output_values()]
    sizes = [tensor_bytes(graph, spec) for spec in specs if spec is not None]
    return None if any(size is None for size in sizes) else sum(sizes)


def tensor_bytes(graph: OpGraph, spec: TensorSpec) -> int | None:
    shape = concrete_shape(graph, spec.shape)
    if shape is None or spec.dtype not in DTYPE_BYTES:
        return None
    return math.prod(shape) * DTYPE_BYTES[spec.dtype]


def concrete_shape(graph: OpGraph, shape: tuple[Any, ...]) -> tuple[int, ...] | None:
    """Symbols replaced by the values they had at capture; None if one is not known."""
    sizes = []
    for dim in shape:
        size = graph.symbol_hints.get(dim) if isinstance(dim, str) else dim
        if size is None:
            return None
        sizes.append(int(size))
    return tuple(sizes)


def matmul_shape(graph: OpGraph, op: str, args: tuple[Any, ...]) -> MatmulShape | None:
    """The product an op computes, from its operands' captured shapes; None when unreadable."""

    def operand(value: Any) -> tuple[tuple[int, ...], str] | None:
        if not (isinstance(value, dict) and "ref" in value):
            return None
        spec = graph.spec_of(value["ref"])
        shape = concrete_shape(graph, spec.shape) if spec is not None else None
        return (shape, spec.dtype) if shape is not None else None

    if op == "aten.einsum.default":
        operands = args[1]["list"] if len(args) > 1 and isinstance(args[1], dict) and "list" in args[1] else []
        read = [operand(value) for value in operands]
        if len(read) != 2 or None in read:
            return None
        return einsum_shape(args[0], read[0][0], read[1][0], read[0][1])
    first, second = (1, 2) if op in ("aten.addmm.default", "aten.baddbmm.default") else (0, 1)
    if len(args) <= second:
        return None
    left, right = operand(args[first]), operand(args[second])
    if left is None or right is None:
        return None
    (a, dtype), (b, _) = left, right
    if op == "aten.linear.default":
        if len(a) < 1 or len(b) != 2:
            return None
        return MatmulShape(1, math.prod(a[:-1]), b[0], b[1], dtype)
    return broadcast_matmul_shape(a, b, dtype)


def broadcast_matmul_shape(a: tuple[int, ...], b: tuple[int, ...], dtype: str) -> MatmulShape | None:
    """torch.matmul's rules: 1-D operands are vectors, leading dimensions broadcast into a batch."""
    if not a or not b:
        return None
    m, k = (1, a[0]) if len(a) == 1 else a[-2:]
    n = 1 if len(b) == 1 else b[-1]
    batch_a, batch_b = a[:-2], b[:-2]
    width = max(len(batch_a), len(batch_b))
    padded_a = (1,) * (width - len(batch_a)) + tuple(batch_a)
    padded_b = (1,) * (width - len(batch_b)) + tuple(batch_b)
    batch = math.prod(max(x, y) for x, y in zip(padded_a, padded_b))
    return MatmulShape(batch, m, n, k, dtype)


def einsum_shape(equation: str, a: tuple[int, ...], b: tuple[int, ...], dtype: str) -> MatmulShape | None:
    """A two-operand einsum as a batched product: batch = indices in both inputs and the output,
    m = only in the first input and the output, n = only in the second and the output,
    k = in both inputs but not the output (summed). Ellipses are not read (None)."""
    equation = equation.replace(" ", "")
    if "..." in equation:
        return None
    inputs, _, output = equation.partition("->")
    parts = inputs.split(",")
    if len(parts) != 2 or len(parts[0]) != len(a) or len(parts[1]) != len(b):
        return None
    if "->" not in equation:
        letters = parts[0] + parts[1]
        output = "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    sizes = dict(zip(parts[0], a)) | dict(zip(parts[1], b))
    first, second = set(parts[0]), set(parts[1])
    kept = set(output)

    def product(letters: set[str]) -> int:
        return math.prod(sizes[c] for c in letters)

    return MatmulShape(
        batch=product(first & second & kept),
        m=product((first - second) & kept),
        n=product((second - first) & kept),
        k=product((first & second) - kept) * product((first ^ second) - kept),
        dtype=dtype,
    )
