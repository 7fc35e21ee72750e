"""Per-op correctness: each supported elementwise op, captured, compiled, and run at an odd size.

Captured at 4 x 6, run at 37 x 53 (the kernels must read sizes at run time), against the module itself.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter computes masked-off lanes too

CAPTURE_SHAPE = (4, 6)
TEST_SHAPE = (37, 53)


class OneInput(nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x):
        return self.function(x)


class TwoInputs(nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x, y):
        return self.function(x, y)


def normal(shape, dtype=torch.float32):
    return torch.randn(shape, dtype=dtype)


def positive(shape, dtype=torch.float32):
    return (torch.rand(shape) * 3 + 0.1).to(dtype)


UNARY_CASES = {
    "aten.neg.default": (lambda x: -x, normal),
    "aten.abs.default": (torch.abs, normal),
    "aten.exp.default": (torch.exp, normal),
    "aten.log.default": (torch.log, positive),
    "aten.sqrt.default": (torch.sqrt, positive),
    "aten.rsqrt.default": (torch.rsqrt, positive),
    "aten.reciprocal.default": (torch.reciprocal, positive),
    "aten.square.default": (torch.square, normal),
    "aten.pow.Tensor_Scalar[2]": (lambda x: x**2, normal),
    "aten.pow.Tensor_Scalar[3]": (lambda x: x**3, normal),
    "aten.pow.Tensor_Scalar[5]": (lambda x: x**5, normal),
    "aten.pow.Tensor_Scalar[-3]": (lambda x: x**-3, positive),
    "aten.pow.Tensor_Scalar[0.5]": (lambda x: x**0.5, positive),
    "aten.pow.Tensor_Scalar[-0.5]": (lambda x: x**-0.5, positive),
    "aten.pow.Tensor_Scalar[2.5]": (lambda x: x**2.5, positive),
    "aten.relu.default": (F.relu, normal),
    "aten.relu6.default": (lambda x: F.relu6(x * 4), normal),
    "aten.gelu.default[none]": (F.gelu, normal),
    "aten.gelu.default[tanh]": (lambda x: F.gelu(x, approximate="tanh"), normal),
    "aten.sigmoid.default": (torch.sigmoid, normal),
    "aten.tanh.default": (torch.tanh, normal),
    "aten.tanh.default[near zero]": (lambda x: torch.tanh(x * 1e-3), normal),
    "aten.tanh.default[saturated]": (lambda x: torch.tanh(x * 30), normal),
    "aten.silu.default": (F.silu, normal),
    "aten.mish.default": (F.mish, normal),
    "aten.softplus.default": (F.softplus, normal),
    "aten.softplus.default[beta, threshold]": (lambda x: F.softplus(x * 3, beta=2, threshold=4), normal),
    "aten.elu.default": (F.elu, normal),
    "aten.elu.default[alpha]": (lambda x: F.elu(x, alpha=0.5), normal),
    "aten.selu.default": (F.selu, normal),
    "aten.leaky_relu.default": (lambda x: F.leaky_relu(x, 0.2), normal),
    "aten.hardtanh.default": (lambda x: F.hardtanh(x, -0.5, 0.75), normal),
    "aten.hardswish.default": (lambda x: F.hardswish(x * 4), normal),
    "aten.hardsigmoid.default": (lambda x: F.hardsigmoid(x * 4), normal),
    "aten.clamp.default": (lambda x: x.clamp(-0.5, 0.5), normal),
    "aten.clamp.default[min above max]": (lambda x: x.clamp(0.5, -0.5), normal),
    "aten.clamp.default[min only]": (lambda x: x.clamp(min=0.1), normal),
    "aten.clamp.default[max only]": (lambda x: x.clamp(max=0.1), normal),
    "aten.clamp_min.default": (lambda x: torch.clamp_min(x, 0.2), normal),
    "aten.clamp_max.default": (lambda x: torch.clamp_max(x, 0.2), normal),
    "aten.sin.default": (torch.sin, normal),
    "aten.cos.default": (torch.cos, normal),
    "aten.erf.default": (torch.erf, normal),
    "aten.dropout.default[eval]": (lambda x: F.dropout(x, 0.5, training=False) * 2, normal),
    "aten.clone.default": (lambda x: (x * 2).clone(), normal),
    "aten.to.dtype": (lambda x: (x * 3).to(torch.float16).to(torch.float32), normal),
    "aten.add.Tensor[scalar]": (lambda x: x + 1.5, normal),
    "aten.sub.Tensor[scalar]": (lambda x: x - 1.5, normal),
    "aten.rsub.Scalar": (lambda x: 2 - x, normal),
    "aten.mul.Tensor[scalar]": (lambda x: x * 2.5, normal),
    "aten.div.Tensor[scalar]": (lambda x: x / 3, normal),
    "aten.div.Tensor_mode[None]": (lambda x: torch.div(x, 3, rounding_mode=None), normal),
    "aten.where.ScalarOther": (lambda x: torch.where(x > 0, x, 0.25), normal),
    "aten.where.Scalar": (lambda x: torch.where(x > 0, 0.25, 0.75) * x, normal),
    "aten.log1p.default": (lambda x: torch.log1p(x.abs()), normal),
    "aten.log1p.default[tiny]": (lambda x: torch.log1p(x * 1e-6), normal),
    "aten.expm1.default": (torch.expm1, normal),
    "aten.expm1.default[tiny]": (lambda x: torch.expm1(x * 1e-6), normal),
    "aten.exp2.default": (torch.exp2, normal),
    "aten.log2.default": (torch.log2, positive),
    "aten.log_sigmoid.default": (lambda x: F.logsigmoid(x * 30), normal),
    "aten.celu.default": (lambda x: F.celu(x, alpha=0.7), normal),
    "aten.sign.default": (lambda x: torch.sign(torch.round(x)), normal),
    "aten.floor.default": (lambda x: torch.floor(x * 3), normal),
    "aten.ceil.default": (lambda x: torch.ceil(x * 3), normal),
    "aten.trunc.default": (lambda x: torch.trunc(x * 3), normal),
    "aten.masked_fill.Scalar": (lambda x: x.masked_fill(x > 0.2, -1.5), normal),
    "aten.threshold.default": (lambda x: F.threshold(x, 0.1, 20.0), normal),
    "aten.gt.Scalar": (lambda x: x > 0.1, normal),
    "aten.le.Scalar": (lambda x: x <= -0.3, normal),
    "aten.isnan.default": (lambda x: torch.isnan(torch.log(x)), normal),
    "aten.logical_not.default": (lambda x: torch.logical_not(x > 0), normal),
    "aten.bitwise_not.default": (lambda x: ~(x > 0), normal),
}

BINARY_CASES = {
    "aten.add.Tensor": lambda x, y: x + y,
    "aten.add.Tensor[alpha]": lambda x, y: torch.add(x, y, alpha=2),
    "aten.sub.Tensor[alpha]": lambda x, y: torch.sub(x, y, alpha=0.5),
    "aten.rsub.Tensor[alpha]": lambda x, y: torch.rsub(x, y, alpha=3),
    "aten.mul.Tensor": lambda x, y: x * y,
    "aten.div.Tensor": lambda x, y: x / (y.abs() + 0.5),
    "aten.maximum.default": torch.maximum,
    "aten.minimum.default": torch.minimum,
    "aten.where.self": lambda x, y: torch.where(x > y, x, y * 2),
    "aten.clamp.Tensor": lambda x, y: torch.clamp(x, min=y, max=y + 1),
    "aten.clamp_min.Tensor": lambda x, y: torch.clamp_min(x, y),
    "aten.lerp.Scalar": lambda x, y: torch.lerp(x, y, 0.3),
    "aten.lerp.Scalar[high weight]": lambda x, y: torch.lerp(x, y, 0.8),
    "aten.addcmul.default": lambda x, y: torch.addcmul(x, x, y, value=0.5),
    "aten.addcdiv.default": lambda x, y: torch.addcdiv(x, x, y.abs() + 0.5, value=2),
    "aten.eq.Tensor": lambda x, y: x.round() == y.round(),
    "aten.ne.Tensor": lambda x, y: x.round() != y.round(),
    "aten.lt.Tensor": lambda x, y: x < y,
    "aten.ge.Tensor": lambda x, y: x >= y,
    "aten.logical_and.default": lambda x, y: torch.logical_and(x > 0, y > 0),
    "aten.logical_or.default": lambda x, y: torch.logical_or(x > 0, y > 0),
    "aten.logical_xor.default": lambda x, y: torch.logical_xor(x > 0, y > 0),
    "aten.__and__.Tensor": lambda x, y: (x > 0) & (y > 0),
    "aten.__or__.Tensor": lambda x, y: (x > 0) | (y > 0),
    "aten.__xor__.Tensor": lambda x, y: (x > 0) ^ (y > 0),
    "aten.bitwise_and.Tensor": lambda x, y: torch.bitwise_and(x > 0, y > 0),
    "aten.bitwise_or.Tensor[mask select]": lambda x, y: torch.where(torch.bitwise_or(x > 1, y < -1), x, y),
    "aten.bitwise_xor.Tensor": lambda x, y: torch.bitwise_xor(x > 0, y > 0),
}


@pytest.mark.parametrize("case", list(UNARY_CASES), ids=list(UNARY_CASES))
def test_unary_op_matches_pytorch_at_a_new_size(case, run_hybrid):
    function, make_input = UNARY_CASES[case]
    program, actual, expected = run_hybrid(
        OneInput(function), (make_input(CAPTURE_SHAPE),), (make_input(TEST_SHAPE),)
    )
    assert program.kernels, program.schedule
    assert case.split("[")[0] in program.replaced_ops
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("case", list(BINARY_CASES), ids=list(BINARY_CASES))
def test_binary_op_matches_pytorch_at_a_new_size(case, run_hybrid):
    function = BINARY_CASES[case]
    program, actual, expected = run_hybrid(
        TwoInputs(function),
        (normal(CAPTURE_SHAPE), normal(CAPTURE_SHAPE)),
        (normal(TEST_SHAPE), normal(TEST_SHAPE)),
    )
    assert case.split("[")[0] in program.replaced_ops
    torch.testing.assert_close(actual, expected)


class ChannelAffine(nn.Module):
    """Per-channel parameters ([C] against [N, C]) around an activation."""

    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels))
        self.shift = nn.Parameter(torch.randn(channels))

    def forward(self, x):
        return torch.sigmoid(x * self.scale + self.shift) - 0.5


class ImageChannelScale(nn.Module):
    """A [C, 1, 1] parameter against [N, C, H, W], and a 0-d buffer."""

    def __init__(self, channels: int):
        super().__init__()
        self.gain = nn.Parameter(torch.randn(channels, 1, 1))
        self.register_buffer("temperature", torch.tensor(1.7))

    def forward(self, x):
        return F.silu(x * self.gain) / self.temperature


def test_per_channel_parameters_broadcast_against_the_batch(run_hybrid):
    model = ChannelAffine(53)
    program, actual, expected = run_hybrid(model, (normal((4, 53)),), (normal((37, 53)),))
    assert len(program.kernels) == 1
    torch.testing.assert_close(actual, expected)


def test_channel_parameter_and_zero_dim_buffer_broadcast_over_images(run_hybrid):
    model = ImageChannelScale(5)
    program, actual, expected = run_hybrid(model, (normal((2, 5, 4, 6)),), (normal((3, 5, 7, 9)),))
    assert len(program.kernels) == 1
    torch.testing.assert_close(actual, expected)


def test_inputs_that_broadcast_against_each_other(run_hybrid):
    model = TwoInputs(lambda x, y: torch.tanh(x * y) + x)
    program, actual, expected = run_hybrid(
        model, (normal((4, 1)), normal((1, 6))), (normal((37, 1)), normal((1, 53)))
    )
    assert len(program.kernels) == 1
    torch.testing.assert_close(actual, expected)


def test_non_contiguous_input_is_read_through_its_strides(run_hybrid):
    model = OneInput(lambda x: F.gelu(x) * 2)
    transposed = normal((53, 37)).t()
    program, actual, expected = run_hybrid(model, (normal(CAPTURE_SHAPE),), (transposed,))
    torch.testing.assert_close(actual, expected)


def test_contiguous_of_a_transpose_is_read_through_its_strides_in_the_kernel_after_it(run_hybrid):
    model = OneInput(lambda x: x.t().contiguous() + 1)
    program, actual, expected = run_hybrid(model, (normal(CAPTURE_SHAPE),), (normal(TEST_SHAPE),))
    assert program.replaced_ops == ("aten.contiguous.default", "aten.add.Tensor")
    assert actual.is_contiguous()
    torch.testing.assert_close(actual, expected)


def test_a_contiguous_alone_is_left_to_pytorch(compile_model):
    # a kernel that only copies computes nothing; PyTorch's contiguous returns its input itself when it can
    program = compile_model(OneInput(lambda x: x.t().contiguous()), (normal(CAPTURE_SHAPE),))
    assert program.kernels == () and program.kept_copies == ("aten.contiguous.default",)


def test_scalar_arguments_are_applied_as_pytorch_does(run_hybrid):
    model = OneInput(lambda x: torch.rsub(x * 2.5 + 1, 3, alpha=2) / 7 - x**2)
    program, actual, expected = run_hybrid(model, (normal(CAPTURE_SHAPE),), (normal(TEST_SHAPE),))
    assert len(program.kernels) == 1
    torch.testing.assert_close(actual, expected)


def test_integer_and_bool_inputs_are_converted_like_pytorch(run_hybrid):
    model = TwoInputs(lambda x, mask: torch.where(mask, x.to(torch.float32) * 0.5, 2.0) + mask.float())
    int_input = torch.randint(-100, 100, CAPTURE_SHAPE)
    program, actual, expected = run_hybrid(
        model,
        (int_input, torch.rand(CAPTURE_SHAPE) > 0.5),
        (torch.randint(-100, 100, TEST_SHAPE), torch.rand(TEST_SHAPE) > 0.5),
    )
    assert "aten.where.ScalarOther" in program.replaced_ops
    torch.testing.assert_close(actual, expected)


def test_nan_and_infinity_propagate_as_in_pytorch(run_hybrid):
    def activations(x):
        return (
            F.relu(x),
            x.clamp(-1, 1),
            F.hardtanh(x),
            F.leaky_relu(x),
            F.elu(x),
            torch.sigmoid(x),
            torch.tanh(x),
            F.gelu(x),
            torch.maximum(x, x * 0.5),
        )

    special = torch.tensor([float("nan"), float("inf"), float("-inf"), 0.0, -0.0, 1e-30, -50.0, 50.0])
    test_input = torch.cat([special, normal((37 * 53 - special.numel(),))]).reshape(TEST_SHAPE)
    program, actual, expected = run_hybrid(OneInput(activations), (normal(CAPTURE_SHAPE),), (test_input,))
    assert program.kept_ops == ()
    # PyTorch's CPU result at the special values depends on the vector width of the machine's CPU (gelu(inf) is
    # NaN in its AVX-512 path, inf one element at a time): the special values are compared with one-element calls
    one_at_a_time = [torch.stack([out.reshape(-1)[0] for out in activations(value.reshape(1))]) for value in special]
    for index, (got, want) in enumerate(zip(actual, expected)):
        want = want.clone().reshape(-1)
        want[: special.numel()] = torch.stack([row[index] for row in one_at_a_time]).to(want.device)
        torch.testing.assert_close(got.reshape(-1), want, equal_nan=True)


LOW_PRECISION_CASES = {
    "gelu * scale + 1": lambda x: F.gelu(x) * 0.5 + 1,
    "tanh then silu": lambda x: F.silu(torch.tanh(x) * 3),
    "mish and softplus": lambda x: F.mish(x) - F.softplus(x),
    "hardswish then clamp": lambda x: F.hardswish(x * 3).clamp(-0.2, 2),
    "div and rsqrt": lambda x: torch.rsqrt(x.abs() + 1) / (x * x + 2),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("case", list(LOW_PRECISION_CASES), ids=list(LOW_PRECISION_CASES))
def test_low_precision_chains_match_pytorch(case, dtype, run_hybrid):
    model = OneInput(LOW_PRECISION_CASES[case])
    program, actual, expected = run_hybrid(model, (normal(CAPTURE_SHAPE, dtype),), (normal(TEST_SHAPE, dtype),))
    assert len(program.kernels) == 1
    assert actual.dtype == dtype
    tolerance = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}[dtype]
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance)


def test_bfloat16_values_between_ops_are_rounded_to_nearest_as_pytorch_does(run_hybrid):
    """Each op's result is rounded to bfloat16 before the next reads it, to nearest even as PyTorch does. Triton's CPU
    interpreter truncates casts to bfloat16: a bias toward zero that every op adds, which a sum of positive values
    shows (0.2 % here, where rounding to nearest agrees with PyTorch to float32's summation order)."""
    model = OneInput(lambda x: (((x * 3.0 + 1.0) * 0.7 - x) * 1.3).float().sum())
    program, actual, expected = run_hybrid(
        model, (positive(CAPTURE_SHAPE, torch.bfloat16),), (positive(TEST_SHAPE, torch.bfloat16),)
    )
    assert len(program.kernels) == 1
    torch.testing.assert_close(actual, expected, rtol=1e-5, atol=0)


def test_low_precision_parameters_with_float32_math_in_between(run_hybrid):
    model = ChannelAffine(53).to(torch.bfloat16)
    program, actual, expected = run_hybrid(
        model, (normal((4, 53), torch.bfloat16),), (normal((37, 53), torch.bfloat16),)
    )
    torch.testing.assert_close(actual, expected, atol=1.6e-2, rtol=1.6e-2)


def test_a_scalar_compared_with_half_precision_is_rounded_to_it_first(run_hybrid):
    """fp16(0.1) >= 0.1 is True in PyTorch (0.1 becomes fp16 first); in float32 it would be False."""
    at_the_boundary = torch.full(TEST_SHAPE, 0.1, dtype=torch.float16)
    program, actual, expected = run_hybrid(
        OneInput(lambda x: x >= 0.1), (normal(CAPTURE_SHAPE, torch.float16),), (at_the_boundary,)
    )
    assert "aten.ge.Scalar" in program.replaced_ops
    assert expected.all()
    torch.testing.assert_close(actual, expected)


def test_comparisons_of_integer_tensors_are_exact_in_kernels(run_hybrid):
    # beyond 2**24 neighbouring integers are one float32: comparing converted values would call them equal
    model = TwoInputs(lambda x, y: torch.where((x > y) & (x != 2**30 + 1), 1.0, -1.0) * (x == y).float())

    def inputs(shape):
        base = 2**30 + torch.randint(0, 4, shape)
        return base, base + torch.randint(-1, 2, shape)

    program, actual, expected = run_hybrid(model, inputs((4, 6)), inputs((9, 13)))
    assert {"aten.gt.Tensor", "aten.ne.Scalar", "aten.eq.Tensor"} <= set(program.replaced_ops)
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize(
    "compare, dtype",
    [
        (lambda x: x != 0.5, torch.int64),  # a float scalar: PyTorch compares in float
        (lambda x: x < 200, torch.int8),  # a scalar the dtype cannot hold
        (lambda x: x > 3, torch.uint8),
    ],
)
def test_integer_comparisons_pytorch_makes_otherwise_stay_in_pytorch(compare, dtype, compile_model):
    model = OneInput(lambda x: torch.where(compare(x), 1.0, 2.0))
    program = compile_model(model, (torch.randint(0, 100, (4, 6)).to(dtype),))
    assert not any(op.startswith(("aten.ne.", "aten.lt.", "aten.gt.")) for op in program.replaced_ops)


class IntegerMasks(nn.Module):
    """Bitwise ops on integer tensors compute integers, which kernels do not: they stay PyTorch's."""

    def forward(self, x, flags):
        return torch.where(((flags & 3) ^ ~flags) > 0, x, -x)


def test_bitwise_ops_on_integers_stay_in_pytorch(run_hybrid):
    def inputs(rows):
        return (normal((rows, 6)), torch.randint(-8, 8, (rows, 6)))

    program, actual, expected = run_hybrid(IntegerMasks(), inputs(4), inputs(9))
    assert {"aten.__and__.Scalar", "aten.__xor__.Tensor", "aten.bitwise_not.default"} <= set(program.kept_ops)
    torch.testing.assert_close(actual, expected)
