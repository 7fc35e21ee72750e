"""What each loss op computes (`Loss`, read off the op by `loss_of`) and the per-element loss formulas: shared by the
loss template and by pointwise kernels, which compute elementwise losses with reduction='none' as any other op.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from drtriton_lsp.compiler.elementwise import (
    FUSIBLE_DTYPES,
    TRITON_DTYPES,
    DeviceHelpers,
    ElementwiseOp,
    OpRendering,
    TensorOperand,
    bind_arguments,
    float_literal,
    is_finite_number,
)
from drtriton_lsp.compiler.graph import Dim, OpGraph, OpNode

REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}
NOT_A_NUMBER = 'float("nan")'


@dataclass(frozen=True)
class Loss:
    """What one loss op computes, read from its arguments.

    kind: the formula (a key of ELEMENT_FORMULAS, or "cross_entropy", "nll", "cosine_similarity",
    "pairwise_distance", "triplet_margin"). family: "elementwise" (one loss per element of the
    broadcast `domain`), "classes" (one per target element; the input's class dim is `reduced_dim`)
    or "rows" (one per row of `domain` with `reduced_dim` folded). operands: (role, value) of every
    tensor argument. reduction: 0 none, 1 mean, 2 sum. options: the op's scalar arguments.
    """

    kind: str
    family: str
    operands: tuple[tuple[str, str], ...]
    reduction: int
    domain: tuple[Dim, ...]
    reduced_dim: int | None = None
    options: tuple[tuple[str, Any], ...] = ()

    @property
    def primary(self) -> str:
        return self.operands[0][1]

    def operand(self, role: str) -> str | None:
        return dict(self.operands).get(role)

    def option(self, name: str) -> Any:
        return dict(self.options)[name]

    @property
    def positions(self) -> tuple[Dim, ...]:
        """The shape of the per-position losses (before any reduction)."""
        if self.family == "elementwise":
            return self.domain
        return tuple(size for dim, size in enumerate(self.domain) if dim != self.reduced_dim)


def broadcast_shape(shapes: list[tuple[Dim, ...]]) -> tuple[Dim, ...] | None:
    """PyTorch's broadcast of `shapes`, or None where it cannot be known from the graph (two symbols)."""
    rank = max(len(shape) for shape in shapes)
    result: list[Dim] = []
    for position in range(rank):
        sizes = {shape[position - rank + len(shape)] for shape in shapes if position - rank + len(shape) >= 0}
        sizes.discard(1)
        if len(sizes) > 1:
            return None
        result.append(next(iter(sizes)) if sizes else 1)
    return tuple(result)


def _tensor(bound: dict[str, Any], name: str) -> str | None:
    value = bound.get(name)
    return value["ref"] if isinstance(value, dict) and "ref" in value else None


def _same_float_dtype(node: OpNode, graph: OpGraph, values: list[str]) -> bool:
    """The op returns one tensor and every operand has its float dtype (no type promotion involved)."""
    if len(node.outputs) != 1 or node.spec.dtype not in FUSIBLE_DTYPES:
        return False
    return all(graph.spec_of(value) is not None and graph.spec_of(value).dtype == node.spec.dtype for value in values)


def _elementwise_loss(kind: str, roles: tuple[str, ...], optional: tuple[str, ...] = (), options: tuple[str, ...] = ()):
    """Reader for a loss computed element by element over the broadcast of its operands."""

    def read(node: OpNode, graph: OpGraph, bound: dict[str, Any]) -> Loss | None:
        operands = [(role, _tensor(bound, role)) for role in roles]
        operands += [(role, _tensor(bound, role)) for role in optional if bound.get(role) is not None]
        if any(value is None for _, value in operands) or not _same_float_dtype(node, graph, [v for _, v in operands]):
            return None
        scalars = tuple((name, bound[name]) for name in options)
        if not all(is_finite_number(value) or isinstance(value, bool) for _, value in scalars):
            return None
        domain = broadcast_shape([graph.spec_of(value).shape for _, value in operands])
        reduction = bound["reduction"]
        if domain is None or reduction not in REDUCTIONS:
            return None
        if node.spec.shape != (domain if reduction == 0 else ()):
            return None
        return Loss(kind, "elementwise", tuple(operands), reduction, domain, options=scalars)

    return read


def _smooth_l1(node: OpNode, graph: OpGraph, bound: dict[str, Any]) -> Loss | None:
    loss = _elementwise_loss("smooth_l1", ("self", "target"), options=("beta",))(node, graph, bound)
    # beta < 0 raises in PyTorch
    return loss if loss is not None and loss.option("beta") >= 0 else None


def _huber(node: OpNode, graph: OpGraph, bound: dict[str, Any]) -> Loss | None:
    loss = _elementwise_loss("huber", ("self", "target"), options=("delta",))(node, graph, bound)
    return loss if loss is not None and loss.option("delta") > 0 else None


def _class_loss(kind: str):
    """Reader for cross_entropy_loss / nll_loss: class-index targets, optional per-class weight."""

    def read(node: OpNode, graph: OpGraph, bound: dict[str, Any]) -> Loss | None:
        logits, target, weight = _tensor(bound, "self"), _tensor(bound, "target"), _tensor(bound, "weight")
        if logits is None or target is None or (bound.get("weight") is not None and weight is None):
            return None
        if bound.get("label_smoothing", 0.0) != 0.0:
            return None
        if not _same_float_dtype(node, graph, [logits] + ([weight] if weight else [])):
            return None
        ignore_index, reduction = bound["ignore_index"], bound["reduction"]
        if not isinstance(ignore_index, int) or isinstance(ignore_index, bool) or reduction not in REDUCTIONS:
            return None
        input_shape, target_spec = graph.spec_of(logits).shape, graph.spec_of(target)
        class_dim = 1 if len(input_shape) >= 2 else 0
        if len(input_shape) == 0 or target_spec.dtype != "int64":
            return None
        rows = tuple(size for dim, size in enumerate(input_shape) if dim != class_dim)
        target_rows = tuple(target_spec.shape)
        # export may give the target's sizes their own symbols; they must then match at run time
        unknown = [a != b and not (isinstance(a, str) and isinstance(b, str)) for a, b in zip(rows, target_rows)]
        if len(target_rows) != len(rows) or any(unknown) or node.spec.shape != (target_rows if reduction == 0 else ()):
            return None
        if weight is not None and graph.spec_of(weight).shape != (input_shape[class_dim],):
            return None
        operands = (("input", logits), ("target", target)) + ((("weight", weight),) if weight else ())
        domain = target_rows[:class_dim] + (input_shape[class_dim],) + target_rows[class_dim:]
        options = (("ignore_index", ignore_index), ("check_rows", rows != target_rows))
        return Loss(kind, "classes", operands, reduction, domain, class_dim, options)

    return read


def _norm_order(p: Any) -> bool:
    """Orders of at::norm computed here: any finite p > 0 (p = 0 and inf count and compare instead)."""
    return is_finite_number(p) and p > 0


def _cosine_similarity(node: OpNode, graph: OpGraph, bound: dict[str, Any]) -> Loss | None:
    first, second = _tensor(bound, "x1"), _tensor(bound, "x2")
    if first is None or second is None or not _same_float_dtype(node, graph, [first, second]):
        return None
    domain = broadcast_shape([graph.spec_of(first).shape, graph.spec_of(second).shape])
    dim, eps = bound["dim"], bound["eps"]
    if domain is None or not domain or not is_finite_number(eps):
        return None
    if not isinstance(dim, int) or not -len(domain) <= dim < len(domain):
        return None
    operands = (("x1", first), ("x2", second))
    loss = Loss("cosine_similarity", "rows", operands, 0, domain, dim % len(domain), (("eps", eps),))
    return loss if node.spec.shape == loss.positions else None


def _pairwise_distance(node: OpNode, graph: OpGraph, bound: dict[str, Any]) -> Loss | None:
    first, second = _tensor(bound, "x1"), _tensor(bound, "x2")
    if first is None or second is None or not _same_float_dtype(node, graph, [first, second]):
        return None
    domain = broadcast_shape([graph.spec_of(first).shape, graph.spec_of(second).shape])
    p, eps = bound["p"], bound["eps"]
    if domain is None or not domain or bound["keepdim"] or not _norm_order(p) or not is_finite_number(eps):
        return None
    options = (("p", float(p)), ("eps", eps))
    loss = Loss("pairwise_distance", "rows", (("x1", first), ("x2", second)), 0, domain, len(domain) - 1, options)
    return loss if node.spec.shape == loss.positions else None


def _triplet_margin(node: OpNode, graph: OpGraph, bound: dict[str, Any]) -> Loss | None:
    roles = ("anchor", "positive", "negative")
    values = [_tensor(bound, role) for role in roles]
    if None in values or not _same_float_dtype(node, graph, values):
        return None
    shapes = [graph.spec_of(value).shape for value in values]
    domain = broadcast_shape(shapes)
    margin, p, eps, swap, reduction = (bound[name] for name in ("margin", "p", "eps", "swap", "reduction"))
    if domain is None or len({len(shape) for shape in shapes}) != 1 or len(domain) not in (1, 2):
        return None
    if not (is_finite_number(margin) and _norm_order(p) and is_finite_number(eps) and isinstance(swap, bool)) or reduction not in REDUCTIONS:
        return None
    options = (("margin", margin), ("p", float(p)), ("eps", eps), ("swap", swap))
    loss = Loss("triplet_margin", "rows", tuple(zip(roles, values)), reduction, domain, len(domain) - 1, options)
    return loss if node.spec.shape == (loss.positions if reduction == 0 else ()) else None


LOSS_READERS: dict[str, Callable[[OpNode, OpGraph, dict[str, Any]], Loss | None]] = {
    "aten.mse_loss.default": _elementwise_loss("mse", ("self", "target")),
    "aten.l1_loss.default": _elementwise_loss("l1", ("self", "target")),
    "aten.smooth_l1_loss.default": _smooth_l1,
    "aten.huber_loss.default": _huber,
    "aten.soft_margin_loss.default": _elementwise_loss("soft_margin", ("self", "target")),
    "aten.binary_cross_entropy_with_logits.default": _elementwise_loss(
        "binary_cross_entropy_with_logits", ("self", "target"), optional=("weight", "pos_weight")
    ),
    "aten.binary_cross_entropy.default": _elementwise_loss(
        "binary_cross_entropy", ("self", "target"), optional=("weight",)
    ),
    "aten.kl_div.default": _elementwise_loss("kl_div", ("self", "target"), options=("log_target",)),
    "aten.margin_ranking_loss.default": _elementwise_loss(
        "margin_ranking", ("input1", "input2", "target"), options=("margin",)
    ),
    "aten.hinge_embedding_loss.default": _elementwise_loss("hinge_embedding", ("self", "target"), options=("margin",)),
    "aten.cross_entropy_loss.default": _class_loss("cross_entropy"),
    "aten.nll_loss_nd.default": _class_loss("nll"),
    "aten.nll_loss.default": _class_loss("nll"),
    "aten.nll_loss2d.default": _class_loss("nll"),
    "aten.cosine_similarity.default": _cosine_similarity,
    "aten.pairwise_distance.default": _pairwise_distance,
    "aten.triplet_margin_loss.default": _triplet_margin,
}


def loss_of(node: OpNode, graph: OpGraph) -> Loss | None:
    """The loss `node` computes, if this template computes it exactly as PyTorch does; else None."""
    reader = LOSS_READERS.get(node.op)
    return reader(node, graph, bind_arguments(node)) if reader is not None else None



def elementwise_loss_of(node: OpNode, graph: OpGraph) -> Loss | None:
    """The loss `node` computes, when it is one loss per element with reduction='none' (a pointwise op)."""
    loss = loss_of(node, graph)
    return loss if loss is not None and loss.family == "elementwise" and loss.reduction == 0 else None


# --- per-element formulas ---------------------------------------------------------------------------


def _log1p(u: str) -> str:
    """log(1 + u), accurate for tiny u: log(1 + u) * u / ((1 + u) - 1) cancels the rounding of 1 + u.

    Above 1 that correction is not needed (and would be inf / inf for an infinite u).
    """
    corrected = f"tl.log(1.0 + {u}) * {u} / ((1.0 + {u}) - 1.0)"
    return f"tl.where(1.0 + {u} == 1.0, {u}, tl.where({u} > 1.0, tl.log(1.0 + {u}), {corrected}))"


def clamp_min_zero(value: str) -> str:
    # value < 0 is false for NaN, so NaN passes through as clamp_min does
    return f"tl.where({value} < 0.0, 0.0, {value})"


# Each formula gets its operands (role -> float32 variable), the op, `rounded`, which rounds an expression to the op's
# dtype where PyTorch materializes an intermediate tensor (identity for float32), and `name`, which gives the kernel
# variable for each of its locals (one of ELEMENT_NAMES; "element" is the loss).
Rounding = Callable[[str], str]
Naming = Callable[[str], str]


def _mse(x: dict[str, str], loss: Loss, rounded: Rounding, name: Naming) -> list[str]:
    difference = name("difference")
    return [f"{difference} = {rounded(x['self'] + ' - ' + x['target'])}", f"{name('element')} = {difference} * {difference}"]


def _l1(x: dict[str, str], loss: Loss, rounded: Rounding, name: Naming) -> list[str]:
    return [f"{name('element')} = tl.abs({rounded(x['self'] + ' - ' + x['target'])})"]


def _quadratic_near_zero(
    x: dict[str, str], rounded: Rounding, name: Naming, bound: float, near: str, far: str
) -> list[str]:
    """|x - target| as `difference`, then `near` below `bound` and `far` above (expressions of `difference`)."""
    difference = name("difference")
    return [
        f"{difference} = tl.abs({rounded(x['self'] + ' - ' + x['target'])})",
        f"{name('element')} = tl.where({difference} < {float_literal(bound)}, "
        + f"{near.format(d=difference)}, {far.format(d=difference)})",
    ]


def _smooth_l1_lines(x: dict[str, str], loss: Loss, rounded: Rounding, name: Naming) -> list[str]:
    beta = loss.option("beta")
    # beta == 0 is the L1 loss: |d| < 0 never holds, so every element takes |d| - 0
    near, far = f"0.5 * {{d}} * {{d}} / {float_literal(beta)}", f"{{d}} - {float_literal(0.5 * beta)}"
    return _quadratic_near_zero(x, rounded, name, beta, near, far)


def _huber_lines(x: dict[str, str], loss: Loss, rounded: Rounding, name: Naming) -> list[str]:
    delta = loss.option("delta")
    near, far = "0.5 * {d} * {d}", f"{float_literal(delta)} * ({{d}} - {float_literal(0.5 * delta)})"
    return _quadratic_near_zero(x, rounded, name, delta, near, far)


def _soft_margin(x: dict[str, str], loss: Loss, rounded: Rounding, name: Naming) -> list[str]:
    product, exponential = rounded(f"-{x['self']} * {x['target']}"), name("exponential")
    return [f"{exponential} = {rounded(f'tl.exp({product})')}", f"{name('element')} = {_log1p(exponential)}"]


def _bce_with_logits(x: dict[str, str], loss: Loss, rounded: Rounding, name: Naming) -> list[str]:
    logits, target = x["self"], x["target"]
    exponential, log_sigmoid, element = name("exponential"), name("log_sigmoid"), name("element")
    lines = [
        "# log(sigmoid(x)) = min(x, 0) - log1p(exp(-|x|)), never overflowing",
        f"{exponential} = tl.exp(-tl.abs({logits}))",
        f"{log_sigmoid} = {rounded(f'tl.minimum({logits}, 0.0) - ' + _log1p(exponential))}",
    ]
    if "pos_weight" in x:
        log_weight = rounded(f"{rounded(rounded(x['pos_weight'] + ' - 1.0') + ' * ' + target)} + 1.0")
        lines.append(f"{log_sigmoid} = {rounded(log_sigmoid + ' * ' + log_weight)}")
    lines.append(f"{element} = {rounded(rounded('1.0 - ' + target) + ' * ' + logits)} - {log_sigmoid}")
    if "weight" in x:
        lines.append(f"{element} = {rounded(element)} * {x['weight']}")
    return lines


def _binary_cross_entropy(x: dict[str, str], loss: Loss, rounded: Rounding, name: Naming) -> list[str]:
    probability, target = x["self"], x["target"]
    log_probability, log_complement, element = name("log_probability"), name("log_complement"), name("element")
    lines = [
        "# each log is clamped at -100, as PyTorch does, so 0 and 1 give finite losses",
        f"{log_probability} = tl.maximum(tl.log({probability}), -100.0)",
        f"{log_complement} = tl.maximum({_log1p(f'-{probability}')}, -100.0)",
        f"{element} = ({target} - 1.0) * {log_complement} - {target} * {log_probability}",
        "# PyTorch raises for a probability outside [0, 1]; NaN makes such an input visible",
        f"{element} = tl.where(({probability} >= 0.0) & ({probability} <= 1.0), {element}, {NOT_A_NUMBER})",
    ]
    if "weight" in x:
        lines.append(f"{element} = {rounded(element)} * {x['weight']}")
    return lines


def _kl_div(x: dict[str, str], loss: Loss, rounded: Rounding, name: Naming) -> list[str]:
    log_input, target, element = x["self"], x["target"], name("element")
    if loss.option("log_target"):
        return [f"{element} = {rounded(f'tl.exp({target})')} * {rounded(f'{target} - {log_input}')}"]
    entropy = name("entropy")
    return [
        "# xlogy(t, t): 0 where t == 0, NaN where t is NaN, else t * log(t)",
        f"{entropy} = {rounded(f'tl.where({target} == 0.0, 0.0, {target} * tl.log({target}))')}",
        f"{element} = {entropy} - {rounded(f'{target} * {log_input}')}",
    ]


def _margin_ranking(x: dict[str, str], loss: Loss, rounded: Rounding, name: Naming) -> list[str]:
    margin, element = float_literal(loss.option("margin")), name("element")
    scaled = rounded(f"-{x['target']} * {rounded(x['input1'] + ' - ' + x['input2'])}")
    return [f"{element} = {scaled} + {margin}", f"{element} = {clamp_min_zero(element)}"]


def _hinge_embedding(x: dict[str, str], loss: Loss, rounded: Rounding, name: Naming) -> list[str]:
    value, target = x["self"], x["target"]
    margin, margin_part = float_literal(loss.option("margin")), name("margin_part")
    return [
        "# PyTorch adds where(target != 1, clamp_min(margin - x, 0), 0) and where(target != -1, x, 0)",
        f"{margin_part} = {clamp_min_zero(rounded(f'{margin} - {value}'))}",
        f"{name('element')} = tl.where({target} != 1.0, {margin_part}, 0.0) + tl.where({target} != -1.0, {value}, 0.0)",
    ]


ELEMENT_FORMULAS: dict[str, Callable[[dict[str, str], Loss, Rounding, Naming], list[str]]] = {
    "mse": _mse,
    "l1": _l1,
    "smooth_l1": _smooth_l1_lines,
    "huber": _huber_lines,
    "soft_margin": _soft_margin,
    "binary_cross_entropy_with_logits": _bce_with_logits,
    "binary_cross_entropy": _binary_cross_entropy,
    "kl_div": _kl_div,
    "margin_ranking": _margin_ranking,
    "hinge_embedding": _hinge_embedding,
}
# the locals of the formulas besides "element"
ELEMENT_NAMES = ("difference", "exponential", "log_sigmoid", "log_probability", "log_complement", "entropy", "margin_part")


def rounding_to(dtype: str, helpers: DeviceHelpers) -> Rounding:
    """Rounds an expression to `dtype` where PyTorch holds it as a tensor of that dtype (identity for float32)."""

    def rounded(expression: str) -> str:
        if dtype == "float32":
            return f"({expression})" if " " in expression else expression
        if dtype == "bfloat16":
            return f"{helpers.name_of('round_to_bfloat16')}({expression})"
        return f"({expression}).to({TRITON_DTYPES[dtype]}).to(tl.float32)"

    return rounded


def pointwise_loss_lines(kind: str, call: OpRendering) -> list[str]:
    """Statements giving `call.target`, the loss `kind` at each element, inside a pointwise kernel.

    The op was accepted by `elementwise_loss_of`: every tensor operand has the op's float dtype.
    """
    tensors = {role: value for role, value in call.arguments.items() if isinstance(value, TensorOperand)}
    options = tuple((role, value) for role, value in call.arguments.items() if role not in tensors)
    loss = Loss(kind, "elementwise", (), 0, (), options=options)
    locals_: dict[str, str] = {"element": call.target}

    def name(local: str) -> str:
        if local not in locals_:
            locals_[local] = call.scope.fresh(f"{call.target}_{local}")
        return locals_[local]

    dtype = next(iter(tensors.values())).dtype
    operands = {role: call.number(role) for role in tensors}
    return ELEMENT_FORMULAS[kind](operands, loss, rounding_to(dtype, call.helpers), name)


def _pointwise_loss(short_name: str, kind: str) -> ElementwiseOp:
    """An elementwise loss with reduction='none' as a fusible op: the loss template's formula at each element."""
    return ElementwiseOp(
        short_name, lambda call: pointwise_loss_lines(kind, call),
        accepts_node=lambda node, graph: elementwise_loss_of(node, graph) is not None, float_operands_only=True,
    )


# losses with reduction='none' (one loss per element); with 'mean' or 'sum' they anchor loss kernels
POINTWISE_LOSS_OPS: dict[str, ElementwiseOp] = {
    "aten.mse_loss.default": _pointwise_loss("mse_loss", "mse"),
    "aten.l1_loss.default": _pointwise_loss("l1_loss", "l1"),
    "aten.smooth_l1_loss.default": _pointwise_loss("smooth_l1_loss", "smooth_l1"),
    "aten.huber_loss.default": _pointwise_loss("huber_loss", "huber"),
    "aten.soft_margin_loss.default": _pointwise_loss("soft_margin_loss", "soft_margin"),
    "aten.binary_cross_entropy_with_logits.default": _pointwise_loss(
        "bce_with_logits", "binary_cross_entropy_with_logits"
    ),
    "aten.binary_cross_entropy.default": _pointwise_loss("binary_cross_entropy", "binary_cross_entropy"),
    "aten.kl_div.default": _pointwise_loss("kl_div", "kl_div"),
    "aten.margin_ranking_loss.default": _pointwise_loss("margin_ranking_loss", "margin_ranking"),
    "aten.hinge_embedding_loss.default": _pointwise_loss("hinge_embedding_loss", "hinge_embedding"),
}
