"""The elementwise ATen overloads the compiler fuses, and how each becomes Triton statements.

One `ElementwiseOp` per overload that `torch.export` emits; its renderer writes float32 Triton
code with the same forward semantics as PyTorch (NaN propagation included).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from typing import Any, Callable

import numpy

from drtriton_lsp.compiler.aten_schemas import schema_of
from drtriton_lsp.compiler.graph import OpGraph, OpNode
from drtriton_lsp.compiler.names import NameScope
from drtriton_lsp.compiler.reshape_reads import READ_LEVELS_SOURCE

# Output dtypes a fused kernel may produce (it computes in float32 and rounds on store).
FUSIBLE_DTYPES = ("float32", "float16", "bfloat16")
# Integer dtypes a kernel loads as they are: converted to float32 where an op computes with them, compared exactly.
INTEGER_DTYPES = ("int64", "int32", "int16", "int8", "uint8")
# Dtypes a fused kernel may read: loaded as float32, except bool (int1: a condition, or 0/1 in math) and integers.
READABLE_DTYPES = FUSIBLE_DTYPES + ("float64",) + INTEGER_DTYPES + ("bool",)
# Integer dtypes whose comparisons a kernel makes exactly, on the loaded values (uint8 compares through wider types)
COMPARED_INTEGER_DTYPES = {"int64": 63, "int32": 31, "int16": 15, "int8": 7}  # dtype -> its value bits
TRITON_DTYPES = {"float32": "tl.float32", "float16": "tl.float16", "bfloat16": "tl.bfloat16"}
# Schema argument types, as `str(argument.type)` spells them.
TENSOR_TYPES = ("Tensor", "Optional[Tensor]")
NUMBER_TYPES = ("number", "Optional[number]", "float", "Optional[float]")


@dataclass(frozen=True)
class TensorOperand:
    """A tensor argument inside the kernel: a float32 variable, or an int1 one for bool tensors.

    dtype: the tensor's dtype in memory (what PyTorch computes in, before our float32 load).
    """

    variable: str
    is_bool: bool
    dtype: str = "float32"


DEVICE_HELPER_SOURCES = {
    "read_levels": READ_LEVELS_SOURCE,
    "round_to_bfloat16": '''@triton.jit
def {name_by_cast}(x):
    """x rounded to the nearest bfloat16 (ties to even), as float32: one conversion each way on a GPU."""
    return x.to(tl.bfloat16).to(tl.float32)


@triton.jit
def {name_by_integer_ops}(x):
    """x rounded to the nearest bfloat16 (ties to even), as float32, with integer ops: Triton's CPU interpreter
    truncates float32 -> bfloat16 casts instead of rounding them (on an H200 the casts ran a bfloat16 loss kernel in
    111 us against 136 us for these ops)."""
    bits = x.to(tl.uint32, bitcast=True)
    # add just under half a bfloat16 ulp, and one more when the kept part is odd: ties go to even
    bits = bits + 0x7FFF + ((bits >> 16) & 1)
    return ((bits >> 16) << 16).to(tl.float32, bitcast=True)


# compiled kernels are JITFunctions; under the interpreter (TRITON_INTERPRET=1) triton.jit gives another kind
{name_rounds_by_cast} = tl.constexpr(isinstance({name_by_cast}, triton.JITFunction))


@triton.jit
def {name}(x):
    """x rounded to the nearest bfloat16 (ties to even), as float32: by casts when compiled, by integer ops when
    interpreted (the branch is chosen when the kernel is compiled)."""
    if {name_rounds_by_cast}:
        rounded = {name_by_cast}(x)
    else:
        rounded = {name_by_integer_ops}(x)
    return rounded
''',
    "tanh": '''@triton.jit
def {name}(x):
    """tanh in float32, built from tl.exp (Triton's core language has no tanh that runs everywhere)."""
    magnitude = tl.abs(x)
    # exp(-2|x|) cannot overflow, and (1 - e) / (1 + e) is accurate once |x| is not tiny
    e = tl.exp(-2.0 * magnitude)
    large = (1.0 - e) / (1.0 + e)
    # near zero 1 - e cancels, so use the odd Taylor series there (truncation error < 1e-7 relative)
    x2 = x * x
    small = x * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 + x2 * (62.0 / 2835.0)))))
    return tl.where(magnitude < 0.3, small, tl.where(x < 0.0, -large, large))
''',
}


class DeviceHelpers:
    """The `@triton.jit` device functions that kernels call (and the host function launch wrappers call for reshaped
    reads), each emitted once if any kernel uses it.

    Every helper's name is reserved up front, so kernel variables can never shadow one.
    """

    def __init__(self, prefix: str, module_scope: NameScope):
        self._names = {helper: module_scope.fresh(f"{prefix}_{helper}") for helper in sorted(DEVICE_HELPER_SOURCES)}
        # the variants a helper chooses between (round_to_bfloat16's {name_by_cast}), named after it
        self._variant_names = {
            helper: {
                f"name_{variant}": module_scope.fresh(f"{self._names[helper]}_{variant}")
                for variant in dict.fromkeys(re.findall(r"\{name_(\w+)\}", DEVICE_HELPER_SOURCES[helper]))
            }
            for helper in sorted(DEVICE_HELPER_SOURCES)
        }
        self._used: set[str] = set()

    def name_of(self, helper: str) -> str:
        self._used.add(helper)
        return self._names[helper]

    def sources(self) -> list[str]:
        return [
            DEVICE_HELPER_SOURCES[helper].format(name=self._names[helper], **self._variant_names[helper])
            for helper in sorted(self._used)
        ]


@dataclass
class OpRendering:
    """What a renderer sees: the bound arguments (TensorOperand or literal) and where to write."""

    target: str
    arguments: dict[str, Any]
    scope: NameScope
    helpers: DeviceHelpers

    def number(self, name: str) -> str:
        """Argument `name` as a float32 expression."""
        return float_expression(self.arguments[name])

    def assign(self, expression: str) -> list[str]:
        return [f"{self.target} = {expression}"]


def float_expression(value: Any) -> str:
    if isinstance(value, TensorOperand):
        converted = value.is_bool or value.dtype in INTEGER_DTYPES  # loaded as they are (DomainReads.load_lines)
        return f"{value.variable}.to(tl.float32)" if converted else value.variable
    return float_literal(value)


def is_finite_number(value: Any) -> bool:
    """An int or float argument (not a bool) that a kernel can spell as a literal."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def float_literal(value: float | int) -> str:
    return repr(float(value))


Renderer = Callable[[OpRendering], list[str]]
Acceptor = Callable[[dict[str, Any]], bool]  # the op's bound arguments -> fusible?
NodeAcceptor = Callable[[OpNode, OpGraph], bool]


@dataclass(frozen=True)
class ElementwiseOp:
    """A fusible overload. short_name names kernels; may_return_input marks ops that can alias.

    returns_bool: the op produces a bool tensor (comparisons, logical ops) as an int1 variable.
    float_operands_only: every tensor operand must share one floating dtype (comparisons in
    PyTorch happen in that dtype, so integer operands, exact there, would be rounded here).
    integer_operands_too: with float_operands_only, operands may instead share one integer dtype
    (COMPARED_INTEGER_DTYPES), with integer scalars that dtype holds: compared exactly, as loaded.
    bool_operands_only: every tensor operand must be bool (logical ops).
    copies: the op moves its input unchanged (a cast only rounds it on store), so a kernel of such ops alone
    computes nothing.
    accepts_node: a check that needs the graph (operand shapes and dtypes), beside `accepts`.
    """

    short_name: str
    render: Renderer
    accepts: Acceptor | None = None
    accepts_node: NodeAcceptor | None = None
    may_return_input: bool = False
    returns_bool: bool = False
    float_operands_only: bool = False
    integer_operands_too: bool = False
    bool_operands_only: bool = False
    copies: bool = False


def _unary(expression: str) -> Renderer:
    """A renderer for `target = expression` where {x} is the first argument ("self" or "input")."""

    def render(call: OpRendering) -> list[str]:
        first = next(iter(call.arguments))
        return call.assign(expression.format(x=call.number(first)))

    return render


def _with_alpha(call: OpRendering, name: str) -> str:
    alpha = call.arguments["alpha"]
    operand = call.number(name)
    return operand if alpha == 1 else f"{operand} * {float_literal(alpha)}"


def _render_add(call: OpRendering) -> list[str]:
    return call.assign(f"{call.number('self')} + {_with_alpha(call, 'other')}")


def _render_sub(call: OpRendering) -> list[str]:
    return call.assign(f"{call.number('self')} - {_with_alpha(call, 'other')}")


def _render_rsub(call: OpRendering) -> list[str]:
    return call.assign(f"{call.number('other')} - {_with_alpha(call, 'self')}")


def _render_mul(call: OpRendering) -> list[str]:
    return call.assign(f"{call.number('self')} * {call.number('other')}")


def _render_div(call: OpRendering) -> list[str]:
    # div_rn rounds like PyTorch; Triton's `/` may be up to 2 ulp off on GPUs
    return call.assign(f"tl.div_rn({call.number('self')}, {call.number('other')})")


def _render_pow(call: OpRendering) -> list[str]:
    x = call.number("self")
    exponent = float(call.arguments["exponent"])
    special = {
        0.5: f"tl.sqrt_rn({x})",
        -0.5: f"tl.rsqrt({x})",
        1.0: x,
        2.0: f"{x} * {x}",
        3.0: f"{x} * {x} * {x}",
        -1.0: f"tl.div_rn(1.0, {x})",
        -2.0: f"tl.div_rn(1.0, {x} * {x})",
    }
    if exponent in special:
        return call.assign(special[exponent])
    if exponent.is_integer():
        return _integer_power(call, x, int(exponent))
    # x < 0 gives NaN through log2, as PyTorch does for a fractional exponent
    return call.assign(f"tl.exp2({float_literal(exponent)} * tl.log2({x}))")


def _integer_power(call: OpRendering, x: str, exponent: int) -> list[str]:
    """x ** exponent by repeated squaring: a few roundings, and the right sign for negative x."""
    factors: list[str] = []
    lines: list[str] = []
    square = x
    remaining = abs(exponent)
    while True:
        if remaining & 1:
            factors.append(square)
        remaining >>= 1
        if not remaining:
            break
        base = x if x.isidentifier() else call.target
        next_square = call.scope.fresh(f"{base}_pow{2 ** (len(lines) + 1)}")
        lines.append(f"{next_square} = {square} * {square}")
        square = next_square
    product = " * ".join(factors)
    return lines + call.assign(product if exponent > 0 else f"tl.div_rn(1.0, {product})")


def _render_gelu(call: OpRendering) -> list[str]:
    x = call.number("self")
    if call.arguments["approximate"] == "tanh":
        tanh = call.helpers.name_of("tanh")
        # 0.7978845608028654 = sqrt(2 / pi)
        inner = f"0.7978845608028654 * ({x} + 0.044715 * {x} * {x} * {x})"
        return call.assign(f"0.5 * {x} * (1.0 + {tanh}({inner}))")
    # 0.7071067811865476 = 1 / sqrt(2)
    return call.assign(f"{x} * 0.5 * (1.0 + tl.erf({x} * 0.7071067811865476))")


def _render_tanh(call: OpRendering) -> list[str]:
    return call.assign(f"{call.helpers.name_of('tanh')}({call.number('self')})")


def _softplus_expression(scaled: str) -> str:
    """log(1 + exp(scaled)) without overflow: max(s, 0) + log(1 + exp(-|s|))."""
    return f"tl.where({scaled} > 0.0, {scaled}, 0.0) + tl.log(1.0 + tl.exp(-tl.abs({scaled})))"


def _render_softplus(call: OpRendering) -> list[str]:
    x = call.number("self")
    beta = call.arguments["beta"]
    threshold = float_literal(call.arguments["threshold"])
    if beta == 1:
        return call.assign(f"tl.where({x} > {threshold}, {x}, {_softplus_expression(x)})")
    scaled = call.scope.fresh(f"{call.target}_scaled")
    smooth = f"({_softplus_expression(scaled)}) / {float_literal(beta)}"
    # PyTorch returns x itself where beta * x > threshold (linear regime)
    return [f"{scaled} = {x} * {float_literal(beta)}", f"{call.target} = tl.where({scaled} > {threshold}, {x}, {smooth})"]


def _render_mish(call: OpRendering) -> list[str]:
    x = call.number("self")
    return call.assign(f"{x} * {call.helpers.name_of('tanh')}({_softplus_expression(x)})")


def _elu(call: OpRendering, alpha: float, scale: float, input_scale: float) -> list[str]:
    x = call.number("self")
    positive = x if scale == 1 else f"{x} * {float_literal(scale)}"
    scaled_input = x if input_scale == 1 else f"{x} * {float_literal(input_scale)}"
    negative_scale = alpha * scale
    negative = f"(tl.exp({scaled_input}) - 1.0)"
    if negative_scale != 1:
        negative += f" * {float_literal(negative_scale)}"
    return call.assign(f"tl.where({x} > 0.0, {positive}, {negative})")


def _render_elu(call: OpRendering) -> list[str]:
    arguments = call.arguments
    return _elu(call, arguments["alpha"], arguments["scale"], arguments["input_scale"])


def _render_selu(call: OpRendering) -> list[str]:
    return _elu(call, 1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1.0)


def _clamp_lines(target: str, x: str, low: str | None, high: str | None) -> list[str]:
    """min(max(x, low), high) like PyTorch: a NaN input stays NaN (comparisons with NaN are false)."""
    lines: list[str] = []
    current = x
    if low is not None:
        lines.append(f"{target} = tl.where({current} < {low}, {low}, {current})")
        current = target
    if high is not None:
        lines.append(f"{target} = tl.where({current} > {high}, {high}, {current})")
    return lines


def _render_clamp_scalars(low_name: str | None, high_name: str | None) -> Renderer:
    def render(call: OpRendering) -> list[str]:
        low = call.arguments.get(low_name) if low_name else None
        high = call.arguments.get(high_name) if high_name else None
        return _clamp_lines(
            call.target,
            call.number("self"),
            None if low is None else float_literal(low),
            None if high is None else float_literal(high),
        )

    return render


def _render_relu6(call: OpRendering) -> list[str]:
    return _clamp_lines(call.target, call.number("self"), "0.0", "6.0")


PROPAGATE_NAN = "propagate_nan=tl.PropagateNan.ALL"


def _render_clamp_tensors(low_name: str | None, high_name: str | None) -> Renderer:
    """Tensor bounds: PyTorch's max then min, where a NaN in any operand gives NaN."""

    def render(call: OpRendering) -> list[str]:
        expression = call.number("self")
        if low_name and call.arguments.get(low_name) is not None:
            expression = f"tl.maximum({expression}, {call.number(low_name)}, {PROPAGATE_NAN})"
        if high_name and call.arguments.get(high_name) is not None:
            expression = f"tl.minimum({expression}, {call.number(high_name)}, {PROPAGATE_NAN})"
        return call.assign(expression)

    return render


def _render_extremum(function: str) -> Renderer:
    def render(call: OpRendering) -> list[str]:
        return call.assign(f"{function}({call.number('self')}, {call.number('other')}, {PROPAGATE_NAN})")

    return render


def _render_leaky_relu(call: OpRendering) -> list[str]:
    x = call.number("self")
    return call.assign(f"tl.where({x} > 0.0, {x}, {x} * {float_literal(call.arguments['negative_slope'])})")


def _render_hard(include_input: bool) -> Renderer:
    """hardsigmoid = relu6(x + 3) / 6 and hardswish = x * relu6(x + 3) / 6, in PyTorch's order."""

    def render(call: OpRendering) -> list[str]:
        x = call.number("self")
        lines = [f"{call.target} = {x} + 3.0"] + _clamp_lines(call.target, call.target, "0.0", "6.0")
        scaled = f"{x} * {call.target}" if include_input else call.target
        return lines + call.assign(f"{scaled} / 6.0")

    return render


def _render_where(call: OpRendering) -> list[str]:
    condition = call.arguments["condition"]
    return call.assign(f"tl.where({condition.variable}, {call.number('self')}, {call.number('other')})")


def _render_identity(call: OpRendering) -> list[str]:
    # the value itself: the store (or the rounding between ops) converts it to this op's dtype
    first = next(iter(call.arguments))
    return call.assign(call.number(first))


def _log1p_expression(call: OpRendering, x: str) -> list[str]:
    """log(1 + x) accurate for tiny x: log(u) * x / (u - 1) with u = 1 + x cancels the rounding of u."""
    u = call.scope.fresh(f"{call.target}_one_plus")
    return [
        f"{u} = 1.0 + {x}",
        f"{call.target} = tl.where({u} == 1.0, {x}, tl.log({u}) * ({x} / ({u} - 1.0)))",
    ]


def _render_log1p(call: OpRendering) -> list[str]:
    return _log1p_expression(call, call.number("self"))


def _render_expm1(call: OpRendering) -> list[str]:
    """exp(x) - 1 accurate for tiny x (Kahan): (u - 1) * x / log(u) with u = exp(x)."""
    x = call.number("self")
    u = call.scope.fresh(f"{call.target}_exp")
    return [
        f"{u} = tl.exp({x})",
        f"{call.target} = tl.where({u} == 1.0, {x}, tl.where({u} - 1.0 == -1.0, -1.0, ({u} - 1.0) * ({x} / tl.log({u}))))",
    ]


def _render_log_sigmoid(call: OpRendering) -> list[str]:
    """min(x, 0) - log1p(exp(-|x|)): PyTorch's formula, which never overflows."""
    x = call.number("self")
    tail = call.scope.fresh(f"{call.target}_tail")
    lines = [f"{tail} = tl.exp(-tl.abs({x}))"]
    lines += _log1p_expression(OpRendering(tail, call.arguments, call.scope, call.helpers), tail)
    return lines + call.assign(f"tl.where({x} < 0.0, {x}, 0.0) - {tail}")


def _render_celu(call: OpRendering) -> list[str]:
    alpha = float(call.arguments["alpha"])
    return _elu(call, alpha, 1.0, 1.0 / alpha)


def _render_sign(call: OpRendering) -> list[str]:
    # PyTorch: sign(NaN) = 0 and sign(-0.0) = 0
    x = call.number("self")
    return call.assign(f"tl.where({x} > 0.0, 1.0, tl.where({x} < 0.0, -1.0, 0.0))")


def _render_trunc(call: OpRendering) -> list[str]:
    x = call.number("self")
    return call.assign(f"tl.where({x} < 0.0, tl.ceil({x}), tl.floor({x}))")


def _render_lerp(call: OpRendering) -> list[str]:
    """PyTorch's two-sided formula: exact at weight 0 and at weight 1."""
    start, end = call.number("self"), call.number("end")
    weight = float(call.arguments["weight"])
    if weight < 0.5:
        return call.assign(f"{start} + {float_literal(weight)} * ({end} - {start})")
    return call.assign(f"{end} - ({end} - {start}) * {float_literal(1.0 - weight)}")


def _render_addcmul(call: OpRendering) -> list[str]:
    value = float(call.arguments["value"])
    product = f"{call.number('tensor1')} * {call.number('tensor2')}"
    scaled = product if value == 1 else f"{float_literal(value)} * {product}"
    return call.assign(f"{call.number('self')} + {scaled}")


def _render_addcdiv(call: OpRendering) -> list[str]:
    value = float(call.arguments["value"])
    quotient = f"tl.div_rn({call.number('tensor1')}, {call.number('tensor2')})"
    scaled = quotient if value == 1 else f"{float_literal(value)} * {quotient}"
    return call.assign(f"{call.number('self')} + {scaled}")


def _scalar_in_dtype_of(call: OpRendering, scalar: float | int, tensor_name: str) -> str:
    """A Python scalar as PyTorch sees it next to a tensor: rounded to the tensor's float dtype."""
    return float_literal(stored_as(scalar, call.arguments[tensor_name].dtype))


def stored_as(value: float | int, dtype: str) -> float | int | bool:
    """`value` as a tensor of `dtype` holds it (`torch.tensor(value, dtype=dtype).item()`, without torch): floats
    rounded to nearest even, through float32 for the 16-bit ones as c10 converts; integers truncated."""
    if dtype == "bool":
        return bool(value)
    if not dtype.startswith(("float", "bfloat")):
        return int(value)
    if dtype == "float64":
        return float(value)
    with numpy.errstate(over="ignore"):
        single = numpy.float32(value)
    if dtype == "float32":
        return float(single)
    if dtype == "float16":
        with numpy.errstate(over="ignore"):
            return float(numpy.float16(single))
    if numpy.isnan(single):
        return float("nan")
    bits = int(single.view(numpy.uint32))
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000  # bfloat16: the upper half, rounded to nearest even
    return float(numpy.uint32(bits).view(numpy.float32))


def _render_masked_fill(call: OpRendering) -> list[str]:
    value = _scalar_in_dtype_of(call, call.arguments["value"], "self")
    return call.assign(f"tl.where({call.arguments['mask'].variable}, {value}, {call.number('self')})")


def _render_threshold(call: OpRendering) -> list[str]:
    x = call.number("self")
    threshold = _scalar_in_dtype_of(call, call.arguments["threshold"], "self")
    value = _scalar_in_dtype_of(call, call.arguments["value"], "self")
    # x <= threshold is false for NaN, so NaN passes through as in PyTorch
    return call.assign(f"tl.where({x} <= {threshold}, {value}, {x})")


def _render_comparison(operator: str) -> Renderer:
    def render(call: OpRendering) -> list[str]:
        this, other = call.arguments["self"], call.arguments["other"]
        if this.dtype in INTEGER_DTYPES:  # integers compare as loaded, exactly (entry_accepts checked the scalar)
            right = other.variable if isinstance(other, TensorOperand) else repr(int(other))
            return call.assign(f"{this.variable} {operator} {right}")
        right = call.number("other") if isinstance(other, TensorOperand) else _scalar_in_dtype_of(call, other, "self")
        return call.assign(f"{call.number('self')} {operator} {right}")

    return render


def _comparison(short_name: str, operator: str) -> ElementwiseOp:
    """A comparison's entry: a bool result, from operands of one floating or one integer dtype."""
    return ElementwiseOp(
        short_name, _render_comparison(operator), returns_bool=True, float_operands_only=True, integer_operands_too=True
    )


def _render_logical(operator: str) -> Renderer:
    def render(call: OpRendering) -> list[str]:
        return call.assign(f"{call.arguments['self'].variable} {operator} {call.arguments['other'].variable}")

    return render


def _render_logical_not(call: OpRendering) -> list[str]:
    return call.assign(f"{call.arguments['self'].variable} == 0")


def _render_isnan(call: OpRendering) -> list[str]:
    x = call.number("self")
    return call.assign(f"{x} != {x}")


def _both_tensors(bound: dict[str, Any]) -> bool:
    # export may pass a Python bool in a Tensor slot (mask & True); the renderer combines two kernel variables
    return all(isinstance(bound[name], dict) and "ref" in bound[name] for name in ("self", "other"))


def _nonzero_alpha(bound: dict[str, Any]) -> bool:
    return isinstance(bound["alpha"], (int, float)) and bound["alpha"] != 0


def _true_division(bound: dict[str, Any]) -> bool:
    return bound.get("rounding_mode") is None


def _eval_dropout(bound: dict[str, Any]) -> bool:
    return bound["train"] is False


def _known_gelu(bound: dict[str, Any]) -> bool:
    return bound["approximate"] in ("none", "tanh")


def _nonzero_exponent(bound: dict[str, Any]) -> bool:
    # x ** 0 is 1 even for NaN: left to PyTorch rather than special-cased; integer exponents
    # are computed by repeated squaring, so very large ones stay in PyTorch too
    exponent = bound["exponent"]
    return isinstance(exponent, (int, float)) and exponent != 0 and abs(exponent) <= 1024


def _some_bound(bound: dict[str, Any]) -> bool:
    return bound.get("min") is not None or bound.get("max") is not None


def _same_device_copy(bound: dict[str, Any]) -> bool:
    layout = bound.get("layout")
    return bound.get("device") is None and layout in (None, {"layout": "strided"})


_ADD = ElementwiseOp("add", _render_add)
_SUB = ElementwiseOp("sub", _render_sub)
_RSUB = ElementwiseOp("rsub", _render_rsub)
_MUL = ElementwiseOp("mul", _render_mul)
_DIV = ElementwiseOp("div", _render_div, _true_division)
_WHERE = ElementwiseOp("where", _render_where)
_CLAMP_SCALARS = ElementwiseOp("clamp", _render_clamp_scalars("min", "max"), _some_bound)
_CLAMP_TENSORS = ElementwiseOp("clamp", _render_clamp_tensors("min", "max"), _some_bound)
_BOOL_AND = ElementwiseOp("and", _render_logical("&"), _both_tensors, returns_bool=True, bool_operands_only=True)
_BOOL_OR = ElementwiseOp("or", _render_logical("|"), _both_tensors, returns_bool=True, bool_operands_only=True)
_BOOL_XOR = ElementwiseOp("xor", _render_logical("^"), _both_tensors, returns_bool=True, bool_operands_only=True)

ELEMENTWISE_OPS: dict[str, ElementwiseOp] = {
    "aten.add.Tensor": _ADD,
    "aten.add.Scalar": _ADD,
    "aten.sub.Tensor": _SUB,
    "aten.sub.Scalar": _SUB,
    "aten.rsub.Tensor": _RSUB,
    "aten.rsub.Scalar": _RSUB,
    "aten.mul.Tensor": _MUL,
    "aten.mul.Scalar": _MUL,
    "aten.div.Tensor": _DIV,
    "aten.div.Scalar": _DIV,
    "aten.div.Tensor_mode": _DIV,
    "aten.div.Scalar_mode": _DIV,
    "aten.neg.default": ElementwiseOp("neg", _unary("-{x}")),
    "aten.abs.default": ElementwiseOp("abs", _unary("tl.abs({x})")),
    "aten.exp.default": ElementwiseOp("exp", _unary("tl.exp({x})")),
    "aten.log.default": ElementwiseOp("log", _unary("tl.log({x})")),
    "aten.sqrt.default": ElementwiseOp("sqrt", _unary("tl.sqrt_rn({x})")),
    "aten.rsqrt.default": ElementwiseOp("rsqrt", _unary("tl.rsqrt({x})")),
    "aten.reciprocal.default": ElementwiseOp("reciprocal", _unary("tl.div_rn(1.0, {x})")),
    "aten.square.default": ElementwiseOp("square", _unary("{x} * {x}")),
    "aten.pow.Tensor_Scalar": ElementwiseOp("pow", _render_pow, _nonzero_exponent),
    "aten.sin.default": ElementwiseOp("sin", _unary("tl.sin({x})")),
    "aten.cos.default": ElementwiseOp("cos", _unary("tl.cos({x})")),
    "aten.erf.default": ElementwiseOp("erf", _unary("tl.erf({x})")),
    # x < 0 is false for NaN, so NaN passes through as in PyTorch
    "aten.relu.default": ElementwiseOp("relu", _unary("tl.where({x} < 0.0, 0.0, {x})")),
    "aten.relu6.default": ElementwiseOp("relu6", _render_relu6),
    "aten.gelu.default": ElementwiseOp("gelu", _render_gelu, _known_gelu),
    "aten.sigmoid.default": ElementwiseOp("sigmoid", _unary("tl.sigmoid({x})")),
    "aten.tanh.default": ElementwiseOp("tanh", _render_tanh),
    "aten.silu.default": ElementwiseOp("silu", _unary("{x} * tl.sigmoid({x})")),
    "aten.mish.default": ElementwiseOp("mish", _render_mish),
    "aten.softplus.default": ElementwiseOp("softplus", _render_softplus),
    "aten.elu.default": ElementwiseOp("elu", _render_elu),
    "aten.selu.default": ElementwiseOp("selu", _render_selu),
    "aten.leaky_relu.default": ElementwiseOp("leaky_relu", _render_leaky_relu),
    "aten.hardtanh.default": ElementwiseOp("hardtanh", _render_clamp_scalars("min_val", "max_val")),
    "aten.hardsigmoid.default": ElementwiseOp("hardsigmoid", _render_hard(include_input=False)),
    "aten.hardswish.default": ElementwiseOp("hardswish", _render_hard(include_input=True)),
    "aten.clamp.default": _CLAMP_SCALARS,
    "aten.clamp.Tensor": _CLAMP_TENSORS,
    "aten.clamp_min.default": ElementwiseOp("clamp_min", _render_clamp_scalars("min", None)),
    "aten.clamp_max.default": ElementwiseOp("clamp_max", _render_clamp_scalars(None, "max")),
    "aten.clamp_min.Tensor": ElementwiseOp("clamp_min", _render_clamp_tensors("min", None)),
    "aten.clamp_max.Tensor": ElementwiseOp("clamp_max", _render_clamp_tensors(None, "max")),
    "aten.maximum.default": ElementwiseOp("maximum", _render_extremum("tl.maximum")),
    "aten.minimum.default": ElementwiseOp("minimum", _render_extremum("tl.minimum")),
    "aten.where.self": _WHERE,
    "aten.where.ScalarOther": _WHERE,
    "aten.where.ScalarSelf": _WHERE,
    "aten.where.Scalar": _WHERE,
    "aten.log1p.default": ElementwiseOp("log1p", _render_log1p),
    "aten.expm1.default": ElementwiseOp("expm1", _render_expm1),
    "aten.exp2.default": ElementwiseOp("exp2", _unary("tl.exp2({x})")),
    "aten.log2.default": ElementwiseOp("log2", _unary("tl.log2({x})")),
    "aten.log_sigmoid.default": ElementwiseOp("log_sigmoid", _render_log_sigmoid),
    "aten.celu.default": ElementwiseOp("celu", _render_celu, _nonzero_alpha),
    "aten.sign.default": ElementwiseOp("sign", _render_sign, float_operands_only=True),
    "aten.floor.default": ElementwiseOp("floor", _unary("tl.floor({x})"), float_operands_only=True),
    "aten.ceil.default": ElementwiseOp("ceil", _unary("tl.ceil({x})"), float_operands_only=True),
    "aten.trunc.default": ElementwiseOp("trunc", _render_trunc, float_operands_only=True),
    "aten.lerp.Scalar": ElementwiseOp("lerp", _render_lerp),
    "aten.addcmul.default": ElementwiseOp("addcmul", _render_addcmul),
    "aten.addcdiv.default": ElementwiseOp("addcdiv", _render_addcdiv),
    "aten.masked_fill.Scalar": ElementwiseOp("masked_fill", _render_masked_fill, float_operands_only=True),
    "aten.threshold.default": ElementwiseOp("threshold", _render_threshold, float_operands_only=True),
    "aten.gt.Tensor": _comparison("gt", ">"),
    "aten.gt.Scalar": _comparison("gt", ">"),
    "aten.lt.Tensor": _comparison("lt", "<"),
    "aten.lt.Scalar": _comparison("lt", "<"),
    "aten.ge.Tensor": _comparison("ge", ">="),
    "aten.ge.Scalar": _comparison("ge", ">="),
    "aten.le.Tensor": _comparison("le", "<="),
    "aten.le.Scalar": _comparison("le", "<="),
    "aten.eq.Tensor": _comparison("eq", "=="),
    "aten.eq.Scalar": _comparison("eq", "=="),
    "aten.ne.Tensor": _comparison("ne", "!="),
    "aten.ne.Scalar": _comparison("ne", "!="),
    "aten.logical_and.default": ElementwiseOp("logical_and", _render_logical("&"), returns_bool=True, bool_operands_only=True),
    "aten.logical_or.default": ElementwiseOp("logical_or", _render_logical("|"), returns_bool=True, bool_operands_only=True),
    "aten.logical_xor.default": ElementwiseOp("logical_xor", _render_logical("^"), returns_bool=True, bool_operands_only=True),
    "aten.logical_not.default": ElementwiseOp("logical_not", _render_logical_not, returns_bool=True, bool_operands_only=True),
    # Python's &, |, ^ and ~ on bool tensors (masks) are these logical ops; on integer tensors they stay
    "aten.__and__.Tensor": _BOOL_AND,
    "aten.__or__.Tensor": _BOOL_OR,
    "aten.__xor__.Tensor": _BOOL_XOR,
    "aten.bitwise_and.Tensor": _BOOL_AND,
    "aten.bitwise_or.Tensor": _BOOL_OR,
    "aten.bitwise_xor.Tensor": _BOOL_XOR,
    "aten.bitwise_not.default": ElementwiseOp("bitwise_not", _render_logical_not, returns_bool=True, bool_operands_only=True),
    "aten.isnan.default": ElementwiseOp("isnan", _render_isnan, returns_bool=True, float_operands_only=True),
    "aten.dropout.default": ElementwiseOp("dropout", _render_identity, _eval_dropout, may_return_input=True, copies=True),
    "aten.clone.default": ElementwiseOp("clone", _render_identity, copies=True),
    "aten.alias.default": ElementwiseOp("alias", _render_identity, may_return_input=True, copies=True),
    "aten.detach.default": ElementwiseOp("detach", _render_identity, may_return_input=True, copies=True),
    "aten.contiguous.default": ElementwiseOp("contiguous", _render_identity, may_return_input=True, copies=True),
    "aten.to.dtype": ElementwiseOp("to", _render_identity, may_return_input=True, copies=True),
    "aten._to_copy.default": ElementwiseOp("to_copy", _render_identity, _same_device_copy, copies=True),
}


def is_mutating(node: OpNode) -> bool:
    """Whether the op writes into one of its inputs (add_, relu_, copy_, ...)."""
    schema = schema_of(node.op)
    return schema is not None and schema.is_mutable


def bind_arguments(node: OpNode) -> dict[str, Any]:
    """The node's arguments by schema name, defaults filled in, in schema order."""
    schema = schema_of(node.op)
    if schema is None:
        raise KeyError(node.op)
    bound: dict[str, Any] = {}
    for position, argument in enumerate(schema.arguments):
        if not argument.kwarg_only and position < len(node.args):
            bound[argument.name] = node.args[position]
        elif argument.name in node.kwargs:
            bound[argument.name] = node.kwargs[argument.name]
        else:
            bound[argument.name] = argument.default if argument.has_default else None
    return bound


def entry_accepts(entry: ElementwiseOp, node: OpNode, graph: OpGraph, *, graph_mutates: bool) -> bool:
    """Whether `node`, an op of `entry`'s overload, can run inside a fused kernel with PyTorch's exact semantics.

    graph_mutates: the graph has in-place ops; then ops that may return their input itself stay
    in PyTorch, so an in-place write through that alias still reaches the other name.
    """
    if len(node.outputs) != 1:
        return False
    if node.spec.dtype not in (("bool",) if entry.returns_bool else FUSIBLE_DTYPES):
        return False
    if graph_mutates and entry.may_return_input:
        return False
    bound = bind_arguments(node)
    schema = schema_of(node.op)
    reads_a_tensor = False
    operand_dtypes: set[str] = set()
    for argument in schema.arguments:
        value = bound[argument.name]
        argument_type = argument.type
        is_reference = isinstance(value, dict) and "ref" in value
        if is_reference:
            spec = graph.spec_of(value["ref"])
            if spec is None or spec.dtype not in READABLE_DTYPES or argument_type not in TENSOR_TYPES:
                return False
            reads_a_tensor = True
            if argument.name not in ("condition", "mask"):
                operand_dtypes.add(spec.dtype)
        elif argument_type in TENSOR_TYPES + NUMBER_TYPES and not _is_finite_number_or_none(value):
            # export passes Python scalars in Tensor slots too (x + 1.0 is aten.add.Tensor)
            return False
        if argument.name in ("condition", "mask") and not (is_reference and spec.dtype == "bool"):
            return False
    if entry.float_operands_only and not (
        (len(operand_dtypes) == 1 and operand_dtypes <= set(FUSIBLE_DTYPES))
        or (entry.integer_operands_too and _compares_integers_exactly(bound, schema, operand_dtypes))
    ):
        return False
    if entry.bool_operands_only and operand_dtypes != {"bool"}:
        return False
    if entry.accepts_node is not None and not entry.accepts_node(node, graph):
        return False
    return reads_a_tensor and (entry.accepts is None or entry.accepts(bound))


def _compares_integers_exactly(bound: dict[str, Any], schema, operand_dtypes: set[str]) -> bool:
    """Whether a comparison's tensors share one integer dtype and its scalars are integers that dtype holds (as
    PyTorch then compares them in that dtype, exactly)."""
    if len(operand_dtypes) != 1 or next(iter(operand_dtypes)) not in COMPARED_INTEGER_DTYPES:
        return False
    bits = COMPARED_INTEGER_DTYPES[next(iter(operand_dtypes))]
    for argument in schema.arguments:
        value = bound[argument.name]
        if isinstance(value, dict) or value is None:
            continue
        if type(value) is not int or not -(2**bits) <= value < 2**bits:
            return False
    return True


def _is_finite_number_or_none(value: Any) -> bool:
    # a non-finite literal has no plain Triton spelling; such ops stay in PyTorch
    return value is None or (isinstance(value, (int, float)) and math.isfinite(value))
