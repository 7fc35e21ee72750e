"""Static fusion analysis: chains of elementwise torch ops in a target's forward that one kernel could do.

A pure `ast` walk (no code runs), cheap enough for every save; the results become Hint diagnostics.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from drtriton_lsp.source.targets import SourceSpan, Target

ELEMENTWISE_CALLS = frozenset(
    {
        "abs", "add", "clamp", "clamp_min", "clamp_max", "clip", "cos", "div", "elu", "erf", "exp", "exp2",
        "expm1", "gelu", "hardsigmoid", "hardswish", "hardtanh", "leaky_relu", "log", "log1p", "log2",
        "logsigmoid", "maximum", "minimum", "mish", "mul", "neg", "pow", "reciprocal", "relu", "relu6",
        "rsqrt", "selu", "sigmoid", "sign", "silu", "sin", "softplus", "sqrt", "square", "sub", "tanh",
        "where",
    }
)  # fmt: skip
ELEMENTWISE_OPERATORS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)


@dataclass(frozen=True)
class FusibleChain:
    """Consecutive statements of a forward whose values are elementwise expressions: `ops` ops in all."""

    target_name: str
    span: SourceSpan
    ops: int

    @property
    def message(self) -> str:
        return (
            f"{self.ops} elementwise ops fusible into 1 kernel; est. {self.ops}x fewer bytes moved for this chain "
            f"(drtriton: Generate Triton kernel on {self.target_name})"
        )


def fusible_chains(tree: ast.Module, targets: list[Target]) -> list[FusibleChain]:
    """Every chain of at least two elementwise ops in the targets' forwards, in file order."""
    forwards = _forward_nodes(tree)
    chains = []
    for target in targets:
        forward = forwards.get((target.forward_span.start_line, target.name))
        if forward is not None:
            chains.extend(_chains_in(target.name, forward.body))
    return chains


def _forward_nodes(tree: ast.Module) -> dict[tuple[int, str], ast.FunctionDef | ast.AsyncFunctionDef]:
    """forward methods (and torch functions) by (first line, decorators included; owning target name)."""
    found = {}
    for node in tree.body:
        functions = [(node.name, node)] if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else []
        if isinstance(node, ast.ClassDef):
            functions = [
                (node.name, item)
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == "forward"
            ]
        for owner, function in functions:
            first_line = min([function.lineno, *(decorator.lineno for decorator in function.decorator_list)])
            found[(first_line, owner)] = function
    return found


def _chains_in(target_name: str, body: list[ast.stmt]) -> list[FusibleChain]:
    chains = []
    run: list[tuple[ast.stmt, int]] = []
    for statement in [*body, None]:
        ops = _elementwise_ops(statement.value) if isinstance(statement, (ast.Assign, ast.AnnAssign, ast.Return)) and statement.value is not None else None
        if ops:
            run.append((statement, ops))
            continue
        total = sum(count for _, count in run)
        if total >= 2:
            first, last = run[0][0], run[-1][0]
            span = SourceSpan(first.lineno, first.col_offset, last.end_lineno or last.lineno, last.end_col_offset or 0)
            chains.append(FusibleChain(target_name, span, total))
        run = []
    return chains


def _elementwise_ops(node: ast.expr) -> int | None:
    """How many elementwise ops `node` computes, or None if any part of it is not elementwise."""
    if isinstance(node, (ast.Name, ast.Constant)):
        return 0
    if isinstance(node, ast.Attribute):
        return 0 if isinstance(node.value, (ast.Name, ast.Attribute)) else None
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _elementwise_ops(node.operand)
        return None if inner is None else inner + isinstance(node.op, ast.USub)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ELEMENTWISE_OPERATORS):
        left, right = _elementwise_ops(node.left), _elementwise_ops(node.right)
        return None if left is None or right is None else left + right + 1
    if isinstance(node, ast.Call):
        function = node.func
        name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", None)
        if name not in ELEMENTWISE_CALLS:
            return None
        receiver = 0
        if isinstance(function, ast.Attribute) and not _is_namespace(function.value):
            receiver = _elementwise_ops(function.value)  # a method on a tensor: x.sigmoid()
            if receiver is None:
                return None
        counts = [_elementwise_ops(argument) for argument in node.args]
        counts += [_elementwise_ops(keyword.value) for keyword in node.keywords]
        if any(count is None for count in counts):
            return None
        return receiver + sum(counts) + 1
    return None


def _is_namespace(node: ast.expr) -> bool:
    """torch, F, nn.functional, torch.nn.functional: a module the function lives in, not a tensor."""
    while isinstance(node, ast.Attribute):
        if node.attr in ("functional", "special", "nn"):
            return True
        node = node.value
    return isinstance(node, ast.Name) and node.id in ("torch", "F", "functional", "nn")
