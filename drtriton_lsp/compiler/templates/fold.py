"""What a reduction op computes (`Reduction`, read off the op by `reduction_of`) and the statements that fold it over
the columns of a kernel's tile (`Fold`): shared by the reduce, row and matmul templates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Collection

from drtriton_lsp.compiler.elementwise import FUSIBLE_DTYPES, bind_arguments, is_finite_number
from drtriton_lsp.compiler.graph import Dim, OpGraph, OpNode, TensorSpec
from drtriton_lsp.compiler.names import NameScope
from drtriton_lsp.compiler.templates.pointwise import INDENT

NEGATIVE_INFINITY = 'float("-inf")'
POSITIVE_INFINITY = 'float("inf")'
PROPAGATE_NAN = "propagate_nan=tl.PropagateNan.ALL"


@dataclass(frozen=True)
class Reduction:
    """What one reduction op computes, read from its arguments.

    source: the value reduced. dims: the input dims reduced (sorted, non-negative); keepdim: they
    stay as size-1 dims. combine: how elements fold: "sum", "product", "max", "min", "first_max" /
    "first_min" (the extreme value and the first index holding it; NaN counts as the extreme),
    "logsumexp", "moments" (mean and sum of squared deviations). element: applied to each element
    before folding ("abs", "square", "nonzero", "power") or None. finish: applied to the folded
    value ("mean", "sqrt", "root", "variance", "deviation") or None. outputs: "values", "indices"
    or "values_and_indices". order: p of a general vector norm; correction: of var and std.
    """

    source: str
    dims: tuple[int, ...]
    keepdim: bool
    combine: str
    element: str | None = None
    finish: str | None = None
    outputs: str = "values"
    order: float = 2.0
    correction: float = 1.0


def dims_argument(value: Any, rank: int, *, empty_means_all: bool = True) -> tuple[int, ...] | None:
    """The dims a `dim` argument names, sorted and non-negative; None or [] mean every dim.

    None: the argument is not a valid, distinct list of dims (the op then stays in PyTorch).
    """
    if value is None:
        items: list[Any] = []
    elif isinstance(value, dict) and "list" in value:
        items = list(value["list"])
    elif isinstance(value, (list, tuple)):
        items = list(value)
    elif isinstance(value, int) and not isinstance(value, bool):
        items = [value]
    else:
        return None
    if not items:
        return tuple(range(rank)) if empty_means_all else None
    if not all(isinstance(item, int) and not isinstance(item, bool) and -rank <= item < rank for item in items):
        return None
    dims = sorted(item % rank for item in items)
    return tuple(dims) if len(set(dims)) == len(dims) else None


def result_dtype(bound: dict[str, Any], input_dtype: str) -> str | None:
    """The dtype a reduction returns: its `dtype` argument if the conversion to it is exact, else the input's.

    A narrowing `dtype` (float32 input summed as float16) rounds every element first; it stays in PyTorch.
    """
    requested = bound.get("dtype")
    if requested is None:
        return input_dtype
    name = requested.get("dtype") if isinstance(requested, dict) else None
    return name if name in (input_dtype, "float32") else None


def _plain(combine: str, finish: str | None = None) -> Callable[[dict[str, Any], int, str], Reduction | None]:
    """Reader for sum/mean/prod/amax/amin/logsumexp-like overloads: `dim` (absent: all), `keepdim`."""

    def read(bound: dict[str, Any], rank: int, source: str) -> Reduction | None:
        dims = dims_argument(bound.get("dim"), rank, empty_means_all=combine != "logsumexp")
        if dims is None:
            return None
        return Reduction(source, dims, bool(bound.get("keepdim", False)), combine, finish=finish)

    return read


def _extreme_with_index(combine: str, outputs: str) -> Callable[[dict[str, Any], int, str], Reduction | None]:
    """Reader for max.dim / min.dim (values and indices) and argmax / argmin (indices)."""

    def read(bound: dict[str, Any], rank: int, source: str) -> Reduction | None:
        dims = dims_argument(bound["dim"], rank)
        if dims is None:
            return None
        return Reduction(source, dims, bool(bound["keepdim"]), combine, outputs=outputs)

    return read


def _moments(finish: str) -> Callable[[dict[str, Any], int, str], Reduction | None]:
    """Reader for var / std, in both the `unbiased` and the `correction` spelling."""

    def read(bound: dict[str, Any], rank: int, source: str) -> Reduction | None:
        dims = dims_argument(bound["dim"], rank)
        if "unbiased" in bound:
            correction = 1.0 if bound["unbiased"] else 0.0
        else:
            correction = 1.0 if bound["correction"] is None else bound["correction"]
        if dims is None or not is_finite_number(correction):
            return None
        return Reduction(source, dims, bool(bound["keepdim"]), "moments", finish=finish, correction=float(correction))

    return read


def _vector_norm(bound: dict[str, Any], rank: int, source: str) -> Reduction | None:
    dims = dims_argument(bound["dim"], rank)
    order = bound["ord"]
    if dims is None or not isinstance(order, (int, float)) or isinstance(order, bool) or math.isnan(order):
        return None
    keepdim = bool(bound["keepdim"])
    by_order = {
        2: ("sum", "square", "sqrt"),
        1: ("sum", "abs", None),
        0: ("sum", "nonzero", None),
        math.inf: ("max", "abs", None),
        -math.inf: ("min", "abs", None),
    }
    combine, element, finish = by_order.get(order, ("sum", "power", "root"))
    return Reduction(source, dims, keepdim, combine, element=element, finish=finish, order=float(order))


REDUCTION_READERS: dict[str, Callable[[dict[str, Any], int, str], Reduction | None]] = {
    "aten.sum.dim_IntList": _plain("sum"),
    "aten.sum.default": _plain("sum"),
    "aten.mean.dim": _plain("sum", "mean"),
    "aten.mean.default": _plain("sum", "mean"),
    "aten.prod.dim_int": _plain("product"),
    "aten.prod.default": _plain("product"),
    "aten.amax.default": _plain("max"),
    "aten.amin.default": _plain("min"),
    "aten.max.default": _plain("max"),
    "aten.min.default": _plain("min"),
    "aten.logsumexp.default": _plain("logsumexp"),
    "aten.max.dim": _extreme_with_index("first_max", "values_and_indices"),
    "aten.min.dim": _extreme_with_index("first_min", "values_and_indices"),
    "aten.argmax.default": _extreme_with_index("first_max", "indices"),
    "aten.argmin.default": _extreme_with_index("first_min", "indices"),
    "aten.var.dim": _moments("variance"),
    "aten.var.correction": _moments("variance"),
    "aten.std.dim": _moments("deviation"),
    "aten.std.correction": _moments("deviation"),
    "aten.linalg_vector_norm.default": _vector_norm,
}


def floating_source(node: OpNode, graph: OpGraph) -> tuple[dict[str, Any], str, TensorSpec] | None:
    """The op's bound arguments, its input value and that value's spec, for a float input of rank >= 1
    that can never be empty (PyTorch raises or returns fill values on empty extents)."""
    bound = bind_arguments(node)
    source = bound.get("self")
    if not (isinstance(source, dict) and "ref" in source):
        return None
    spec = graph.spec_of(source["ref"])
    if spec is None or spec.dtype not in FUSIBLE_DTYPES or spec.rank == 0:
        return None
    for size in spec.shape:
        low = graph.symbol_ranges.get(size, [1])[0] if isinstance(size, str) else size
        if low is None or low < 1:
            return None
    return bound, source["ref"], spec


def reduction_of(node: OpNode, graph: OpGraph) -> Reduction | None:
    """The reduction `node` computes, if this template computes it exactly as PyTorch does; else None."""
    reader = REDUCTION_READERS.get(node.op)
    found = floating_source(node, graph) if reader is not None else None
    if found is None:
        return None
    bound, source, spec = found
    reduction = reader(bound, spec.rank, source)
    if reduction is None:
        return None
    values_dtype = result_dtype(bound, spec.dtype)
    expected = {
        "values": [values_dtype],
        "indices": ["int64"],
        "values_and_indices": [values_dtype, "int64"],
    }[reduction.outputs]
    shape = reduced_shape(spec.shape, reduction.dims, reduction.keepdim)
    if [output.dtype for output in node.outputs] != expected or any(output.shape != shape for output in node.outputs):
        return None
    return reduction

def reduced_shape(shape: tuple[Dim, ...], dims: tuple[int, ...], keepdim: bool) -> tuple[Dim, ...]:
    """The output shape of reducing `dims` of `shape`."""
    if keepdim:
        return tuple(1 if dim in dims else size for dim, size in enumerate(shape))
    return tuple(size for dim, size in enumerate(shape) if dim not in dims)

COMBINE_HELPERS = {
    "nan_maximum": '''@triton.jit
def {name}(a, b):
    """The larger of a and b, NaN if either is NaN, as torch.amax folds (tl.max may drop NaN)."""
    return tl.maximum(a, b, propagate_nan=tl.PropagateNan.ALL)
''',
    "nan_minimum": '''@triton.jit
def {name}(a, b):
    """The smaller of a and b, NaN if either is NaN, as torch.amin folds (tl.min may drop NaN)."""
    return tl.minimum(a, b, propagate_nan=tl.PropagateNan.ALL)
''',
    "multiply": '''@triton.jit
def {name}(a, b):
    """a * b: the combine step of a product reduction (Triton has no tl.prod)."""
    return a * b
''',
    "first_largest": '''@triton.jit
def {name}(value1, index1, value2, index2):
    """Of two (value, index) pairs, the one torch.max and argmax keep: NaN beats any number,
    a larger value beats a smaller one, and equal values go to the lower index."""
    nan1 = value1 != value1
    nan2 = value2 != value2
    tie = (value1 == value2) | (nan1 & nan2)
    first = (value1 > value2) | (nan1 & ~nan2) | (tie & (index1 < index2))
    return tl.where(first, value1, value2), tl.where(first, index1, index2)
''',
    "first_smallest": '''@triton.jit
def {name}(value1, index1, value2, index2):
    """Of two (value, index) pairs, the one torch.min and argmin keep: NaN beats any number,
    a smaller value beats a larger one, and equal values go to the lower index."""
    nan1 = value1 != value1
    nan2 = value2 != value2
    tie = (value1 == value2) | (nan1 & nan2)
    first = (value1 < value2) | (nan1 & ~nan2) | (tie & (index1 < index2))
    return tl.where(first, value1, value2), tl.where(first, index1, index2)
''',
}

# what each combine folds masked-off lanes as: a value that leaves the result unchanged
NEUTRAL_ELEMENTS = {
    "sum": "0.0",
    "moments": "0.0",
    "product": "1.0",
    "max": NEGATIVE_INFINITY,
    "first_max": NEGATIVE_INFINITY,
    "logsumexp": NEGATIVE_INFINITY,
    "min": POSITIVE_INFINITY,
    "first_min": POSITIVE_INFINITY,
}
COMBINE_DESCRIPTIONS = {
    "sum": "a sum",
    "product": "a product",
    "max": "a maximum that propagates NaN",
    "min": "a minimum that propagates NaN",
    "first_max": "the maximum and the first index holding it (NaN counts as the maximum)",
    "first_min": "the minimum and the first index holding it (NaN counts as the minimum)",
    "logsumexp": "log(sum(exp(x - m))) + m, m the maximum (0 where m is infinite, as PyTorch does)",
    "moments": "the sum of squared deviations from the mean",
}
LOOP_STATES = {
    "sum": "running per-lane sums",
    "product": "running per-lane products",
    "max": "running per-lane maxima",
    "min": "running per-lane minima",
    "first_max": "each lane's running maximum and its first index",
    "first_min": "each lane's running minimum and its first index",
    "logsumexp": "a running maximum per row and a sum rescaled whenever it grows (online logsumexp)",
    "moments": "running moments per row, each chunk merged in with Chan's parallel update",
}
HELPER_OF_COMBINE = {
    "product": "multiply",
    "max": "nan_maximum",
    "min": "nan_minimum",
    "first_max": "first_largest",
    "first_min": "first_smallest",
    "logsumexp": "nan_maximum",
}


def _element_expression(reduction: Reduction, value: str) -> str:
    """What each element contributes before folding (a vector norm's |x|, x * x, ...)."""
    if reduction.element is None:
        return value
    if reduction.element == "abs":
        return f"tl.abs({value})"
    if reduction.element == "square":
        return f"{value} * {value}"
    if reduction.element == "nonzero":
        return f"tl.where({value} != 0.0, 1.0, 0.0)"
    return f"tl.exp2({reduction.order!r} * tl.log2(tl.abs({value})))"


class FoldNames:
    """The kernel variable behind each name a fold's statements use.

    A reduce kernel holds one fold and reserves its names up front, so every name stands for itself.
    A row kernel holds several: each fold's names are fresh and prefixed with its reduction's, except
    the names of the tile they share (`shared`: masks, columns, sizes).
    """

    def __init__(self, scope: NameScope | None = None, prefix: str = "", shared: Collection[str] = ()):
        self._scope, self._prefix, self._shared = scope, prefix, frozenset(shared)
        self._taken: dict[str, str] = {}

    def __getattr__(self, name: str) -> str:
        if name.startswith("_"):
            raise AttributeError(name)
        if self._scope is None or name in self._shared:
            return name
        if name not in self._taken:
            self._taken[name] = self._scope.fresh(f"{self._prefix}_{name}")
        return self._taken[name]


class Fold:
    """The statements that fold one reduction over the columns of a [ROWS, BLOCK] tile, one value per row:
    the whole extent in one tile (single), or chunk by chunk with running state (loop); then its finish.

    source: the float32 variable of the reduced value in the tile. The statements read `mask` (real
    elements), `column_mask` (real columns), `columns`, `reduced_size` and the float parameters
    `float_parameters` names, which `float_argument` computes in the wrapper. helper: the name of a
    module-level combine function (COMBINE_HELPERS) the kernel defines.
    """

    def __init__(self, reduction: Reduction, source: str, names: FoldNames, helper: Callable[[str], str]):
        self.reduction, self.names, self.helper = reduction, names, helper
        self.element = _element_expression(reduction, source)

    def candidate_lines(self) -> list[str]:
        """The tile's elements as the fold takes them: each element's contribution, masked-off lanes neutral."""
        reduction, v = self.reduction, self.names
        lines = []
        if reduction.element == "power":
            lines.append("# |x| ** p as exp2(p * log2|x|): |x| = 0 gives 0 for p > 0 and inf for p < 0, as pow does")
        neutral = NEUTRAL_ELEMENTS[reduction.combine]
        return lines + [
            f"# masked-off lanes hold {neutral}, which leaves the result unchanged",
            f"{v.candidate} = tl.where(mask, {self.element}, {neutral})",
        ]

    def state_lines(self) -> list[str]:
        """The running state a loop starts from."""
        combine, v = self.reduction.combine, self.names
        if combine == "sum":
            return [f"{v.lane_totals} = tl.zeros([ROWS, BLOCK], tl.float32)"]
        if combine == "product":
            return [f"{v.lane_products} = tl.full([ROWS, BLOCK], 1.0, tl.float32)"]
        if combine in ("max", "min"):
            return [f"{v.lane_extremes} = tl.full([ROWS, BLOCK], {NEUTRAL_ELEMENTS[combine]}, tl.float32)"]
        if combine in ("first_max", "first_min"):
            return [
                f"{v.lane_best} = tl.full([ROWS, BLOCK], {NEUTRAL_ELEMENTS[combine]}, tl.float32)",
                "# a lane that never sees an element keeps index reduced_size, which loses every tie",
                f"{v.lane_best_index} = tl.zeros([ROWS, BLOCK], tl.int64) + reduced_size",
            ]
        if combine == "logsumexp":
            return [
                f"{v.running_max} = tl.full([ROWS], {NEGATIVE_INFINITY}, tl.float32)",
                f"{v.running_total} = tl.zeros([ROWS], tl.float32)",
            ]
        return [
            f"{v.seen} = tl.zeros([ROWS], tl.float32)",
            f"{v.running_mean} = tl.zeros([ROWS], tl.float32)",
            f"{v.running_squares} = tl.zeros([ROWS], tl.float32)",
        ]

    def step_lines(self) -> list[str]:
        """One loop step: the chunk's candidates folded into the running state."""
        combine, v = self.reduction.combine, self.names
        if combine == "sum":
            return [f"{v.lane_totals} += {v.candidate}"]
        if combine == "product":
            return [f"{v.lane_products} *= {v.candidate}"]
        if combine in ("max", "min"):
            function = "tl.maximum" if combine == "max" else "tl.minimum"
            return [f"{v.lane_extremes} = {function}({v.lane_extremes}, {v.candidate}, {PROPAGATE_NAN})"]
        if combine in ("first_max", "first_min"):
            return [
                "# a lane sees increasing indices, so on a tie it keeps its earlier element",
                f"{v.lane_best}, {v.lane_best_index} = {self.helper(HELPER_OF_COMBINE[combine])}(",
                f"{INDENT}{v.lane_best}, {v.lane_best_index}, {v.candidate}, columns[None, :]",
                ")",
            ]
        if combine == "logsumexp":
            return [
                f"{v.chunk_max} = tl.reduce({v.candidate}, 1, {self.helper('nan_maximum')})",
                f"{v.new_max} = tl.maximum({v.running_max}, {v.chunk_max}, {PROPAGATE_NAN})",
                "# exp is taken relative to a finite shift: the maximum, or 0 where it is infinite",
                f"{v.old_shift} = tl.where(tl.abs({v.running_max}) == {POSITIVE_INFINITY}, 0.0, {v.running_max})",
                f"{v.shift} = tl.where(tl.abs({v.new_max}) == {POSITIVE_INFINITY}, 0.0, {v.new_max})",
                "# rescale the sum so far to the new shift; a row that has seen only -inf has summed nothing",
                f"{v.running_total} = tl.where(",
                f"{INDENT}{v.running_max} == {NEGATIVE_INFINITY}, 0.0, "
                f"{v.running_total} * tl.exp({v.old_shift} - {v.shift})",
                f") + tl.sum(tl.exp({v.candidate} - {v.shift}[:, None]), axis=1)",
                f"{v.running_max} = {v.new_max}",
            ]
        return [
            "# this chunk's mean and squared deviations from it, in registers",
            f"{v.chunk_count} = tl.sum(column_mask.to(tl.float32), axis=0)",
            f"{v.chunk_mean} = tl.div_rn(tl.sum({v.candidate}, axis=1), {v.chunk_count})",
            f"{v.deviation} = tl.where(mask, {self.element} - {v.chunk_mean}[:, None], 0.0)",
            f"{v.chunk_squares} = tl.sum({v.deviation} * {v.deviation}, axis=1)",
            "# merge them into the row's running moments (Chan et al.), stable for any chunk sizes",
            f"{v.combined} = {v.seen} + {v.chunk_count}",
            f"{v.delta} = {v.chunk_mean} - {v.running_mean}",
            f"{v.running_mean} += {v.delta} * tl.div_rn({v.chunk_count}, {v.combined})",
            f"{v.running_squares} += {v.chunk_squares} + {v.delta} * {v.delta} * "
            f"tl.div_rn({v.seen} * {v.chunk_count}, {v.combined})",
            f"{v.seen} = {v.combined}",
        ]

    def loop_fold(self) -> tuple[list[str], str]:
        """After the loop: statements and the expression of each row's folded value."""
        combine, v = self.reduction.combine, self.names
        if combine == "sum":
            return [], f"tl.sum({v.lane_totals}, axis=1)"
        if combine in ("product", "max", "min"):
            state = v.lane_products if combine == "product" else v.lane_extremes
            return [], f"tl.reduce({state}, 1, {self.helper(HELPER_OF_COMBINE[combine])})"
        if combine in ("first_max", "first_min"):
            helper = self.helper(HELPER_OF_COMBINE[combine])
            return [], f"tl.reduce(({v.lane_best}, {v.lane_best_index}), 1, {helper})"
        if combine == "logsumexp":
            return [
                f"{v.shift} = tl.where(tl.abs({v.running_max}) == {POSITIVE_INFINITY}, 0.0, {v.running_max})"
            ], f"tl.log({v.running_total}) + {v.shift}"
        return [], v.running_squares

    def single_fold(self) -> tuple[list[str], str]:
        """After the row's one tile: statements and the expression of each row's folded value."""
        combine, v = self.reduction.combine, self.names
        if combine == "sum":
            return [], f"tl.sum({v.candidate}, axis=1)"
        if combine in ("product", "max", "min"):
            return [], f"tl.reduce({v.candidate}, 1, {self.helper(HELPER_OF_COMBINE[combine])})"
        if combine in ("first_max", "first_min"):
            helper = self.helper(HELPER_OF_COMBINE[combine])
            return [f"{v.indices} = tl.broadcast_to(columns[None, :], [ROWS, BLOCK])"], (
                f"tl.reduce(({v.candidate}, {v.indices}), 1, {helper})"
            )
        if combine == "logsumexp":
            return [
                f"{v.running_max} = tl.reduce({v.candidate}, 1, {self.helper('nan_maximum')})",
                "# exp is taken relative to a finite shift: the maximum, or 0 where it is infinite",
                f"{v.shift} = tl.where(tl.abs({v.running_max}) == {POSITIVE_INFINITY}, 0.0, {v.running_max})",
            ], f"tl.log(tl.sum(tl.exp({v.candidate} - {v.shift}[:, None]), axis=1)) + {v.shift}"
        return [
            "# two passes over the row in registers: the mean, then squared deviations from it",
            f"{v.row_mean} = tl.div_rn(tl.sum({v.candidate}, axis=1), reduced_count)",
            f"{v.deviation} = tl.where(mask, {self.element} - {v.row_mean}[:, None], 0.0)",
        ], f"tl.sum({v.deviation} * {v.deviation}, axis=1)"

    def finish(self, results: list[str], folded: str) -> list[str]:
        """The reduction's results from the folded value (the mean's division, a norm's root, ...)."""
        reduction = self.reduction
        if reduction.outputs == "indices":
            return [f"_, {results[0]} = {folded}"]
        if reduction.outputs == "values_and_indices":
            return [f"{results[0]}, {results[1]} = {folded}"]
        if reduction.finish == "root":
            return [f"{results[0]} = tl.exp2(tl.log2({folded}) * {1.0 / reduction.order!r})"]
        divisor = self.names.divisor
        expression = {
            None: folded,
            "mean": f"tl.div_rn({folded}, reduced_count)",
            "sqrt": f"tl.sqrt_rn({folded})",
            "variance": f"tl.div_rn({folded}, {divisor})",
            "deviation": f"tl.sqrt_rn(tl.div_rn({folded}, {divisor}))",
        }[reduction.finish]
        return [f"{results[0]} = {expression}"]

    def float_parameters(self, *, single: bool) -> list[str]:
        """Float scalars from the wrapper (floats, unlike ints equal to 1, are never specialised to constants)."""
        reduction = self.reduction
        names = []
        if reduction.finish == "mean" or (reduction.combine == "moments" and single):
            names.append("reduced_count")
        if reduction.combine == "moments":
            names.append(self.names.divisor)
        return names

    def float_argument(self, name: str, reduced_size: str) -> str:
        """The wrapper's expression for a float parameter, given its expression for the reduced extent."""
        if name == "reduced_count":
            return f"float({reduced_size})"
        # PyTorch divides by max(n - correction, 0): 0 gives inf, or NaN for a zero sum
        return f"float(max({reduced_size} - {self.reduction.correction!r}, 0.0))"
