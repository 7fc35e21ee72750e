"""The pool template: max, average and adaptive pooling against PyTorch, at odd sizes and a new batch.

Captured at one size and run at another (sizes are read at run time), with strided inputs, NaN and ties.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.script import parse_schedule, print_schedule
from drtriton_lsp.worker.capture import capture_graph

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter computes masked-off lanes too


class Pool(nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x):
        return self.function(x)


# name -> (function, op it must replace, capture shape, test shape)
POOL_CASES = {
    "max_pool2d 3/2/1": (lambda x: F.max_pool2d(x, 3, 2, 1), "aten.max_pool2d.default", (2, 3, 9, 11), (3, 2, 13, 7)),
    "MaxPool1d(3)": (nn.MaxPool1d(3), "aten.max_pool1d.default", (2, 3, 10), (3, 2, 17)),
    "MaxPool2d dilation ceil": (
        nn.MaxPool2d(3, 2, 1, dilation=2, ceil_mode=True), "aten.max_pool2d.default", (2, 3, 9, 11), (2, 3, 10, 13)
    ),
    "MaxPool3d(2)": (nn.MaxPool3d(2), "aten.max_pool3d.default", (2, 3, 4, 6, 6), (1, 2, 5, 7, 9)),
    "max_pool2d unbatched": (lambda x: F.max_pool2d(x, 2), "aten.max_pool2d.default", (3, 8, 8), (5, 9, 7)),
    "max_pool1d indices": (
        lambda x: F.max_pool1d(x, 3, 2, 1, dilation=2, ceil_mode=True, return_indices=True),
        "aten.max_pool1d_with_indices.default", (2, 3, 10), (3, 2, 17),
    ),
    "max_pool2d indices": (
        lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True),
        "aten.max_pool2d_with_indices.default", (2, 3, 9, 11), (3, 2, 13, 7),
    ),
    "max_pool3d indices": (
        lambda x: F.max_pool3d(x, 3, 2, 1, return_indices=True),
        "aten.max_pool3d_with_indices.default", (2, 3, 4, 6, 6), (1, 2, 5, 7, 9),
    ),
    "avg_pool2d(2)": (lambda x: F.avg_pool2d(x, 2), "aten.avg_pool2d.default", (2, 3, 8, 8), (3, 5, 9, 7)),
    "avg_pool2d padding counted": (lambda x: F.avg_pool2d(x, 3, 2, 1), "aten.avg_pool2d.default", (2, 3, 8, 8), (3, 5, 9, 7)),
    "avg_pool2d ceil, padding counted": (
        lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True), "aten.avg_pool2d.default", (2, 3, 8, 8), (3, 5, 9, 7)
    ),
    "avg_pool2d ceil, padding not counted": (
        lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        "aten.avg_pool2d.default", (2, 3, 8, 8), (3, 5, 9, 7),
    ),
    "avg_pool2d divisor_override": (
        lambda x: F.avg_pool2d(x, 3, 2, 1, divisor_override=5), "aten.avg_pool2d.default", (2, 3, 8, 8), (3, 5, 9, 7)
    ),
    "AvgPool1d(3, 2, 1)": (nn.AvgPool1d(3, 2, 1), "aten.avg_pool1d.default", (2, 3, 10), (3, 2, 17)),
    "avg_pool3d ceil, padding not counted": (
        lambda x: F.avg_pool3d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
        "aten.avg_pool3d.default", (2, 3, 4, 6, 6), (1, 2, 5, 7, 9),
    ),
    "AdaptiveAvgPool2d((1, 1))": (nn.AdaptiveAvgPool2d((1, 1)), "aten.adaptive_avg_pool2d.default", (2, 3, 8, 8), (3, 5, 9, 7)),
    "AdaptiveAvgPool2d((5, 7))": (nn.AdaptiveAvgPool2d((5, 7)), "aten.adaptive_avg_pool2d.default", (2, 3, 8, 9), (3, 2, 13, 11)),
    "AdaptiveAvgPool1d(5)": (nn.AdaptiveAvgPool1d(5), "aten.adaptive_avg_pool1d.default", (2, 3, 8), (3, 2, 17)),
    "AdaptiveAvgPool3d((2, 3, 1))": (
        nn.AdaptiveAvgPool3d((2, 3, 1)), "aten.adaptive_avg_pool3d.default", (2, 3, 5, 5, 5), (1, 2, 5, 7, 9)
    ),
    "adaptive_max_pool1d indices": (
        lambda x: F.adaptive_max_pool1d(x, 3, return_indices=True),
        "aten.adaptive_max_pool1d.default", (2, 3, 8), (3, 2, 13),
    ),
    "adaptive_max_pool2d indices": (
        lambda x: F.adaptive_max_pool2d(x, (3, 4), return_indices=True),
        "aten.adaptive_max_pool2d.default", (2, 3, 8, 8), (3, 2, 13, 11),
    ),
}


def strategy_script(schedule: str, strategy: str, block: int, window: int) -> str:
    """The script with the pool kernel's strategy, block and window replaced."""
    changed = re.sub(
        r"strategy=\w+ block=\d+ window=\d+", f"strategy={strategy} block={block} window={window}", schedule
    )
    assert changed != schedule or f"strategy={strategy} block={block} window={window}" in schedule
    return changed


def assert_same(actual, expected, **tolerance):
    if isinstance(expected, tuple):
        for got, want in zip(actual, expected, strict=True):
            torch.testing.assert_close(got, want, equal_nan=True, **tolerance)
    else:
        torch.testing.assert_close(actual, expected, equal_nan=True, **tolerance)


@pytest.mark.parametrize("case", list(POOL_CASES), ids=list(POOL_CASES))
def test_pool_matches_pytorch_at_a_new_size(case, run_hybrid):
    function, op, capture_shape, test_shape = POOL_CASES[case]
    program, actual, expected = run_hybrid(Pool(function), (torch.randn(capture_shape),), (torch.randn(test_shape),))
    assert program.replaced_ops == (op,) and program.kept_ops == ()
    assert_same(actual, expected)


def compile_and_load(model, example, load_program, schedule=None):
    graph = capture_graph(model.eval(), (example,))
    program = compile_graph(graph, prefix="model", forward_params=["x"], has_self=True, schedule=schedule)
    return program, getattr(load_program(program), program.forward_function)


def ties_nan_and_infinities(shape) -> torch.Tensor:
    """Small integers (many ties) with NaN, -inf and inf scattered through them."""
    values = torch.randint(-2, 3, shape).float()
    flat = values.view(-1)
    flat[::11] = float("nan")
    flat[3::13] = float("-inf")
    flat[5::17] = float("inf")
    return values


@pytest.mark.parametrize(
    "function",
    [
        lambda x: F.max_pool2d(x, 3, 2, 1, dilation=2, ceil_mode=True, return_indices=True),
        lambda x: F.adaptive_max_pool2d(x, (3, 4), return_indices=True),
    ],
    ids=["max_pool2d", "adaptive_max_pool2d"],
)
@pytest.mark.parametrize("strategy", [("direct", 64, 16), ("tiled", 16, 2)], ids=["direct", "tiled"])
def test_max_indices_follow_pytorch_on_ties_nan_and_infinities(function, strategy, device, load_program):
    model = Pool(function)
    program, _ = compile_and_load(model, torch.randn(2, 3, 9, 11), load_program)
    script = strategy_script(program.schedule, *strategy)
    program, forward = compile_and_load(model, torch.randn(2, 3, 9, 11), load_program, schedule=script)
    x = ties_nan_and_infinities((3, 2, 13, 7)).to(device)
    values, indices = forward(model, x)
    expected_values, expected_indices = model(x)
    torch.testing.assert_close(values, expected_values, equal_nan=True)
    torch.testing.assert_close(indices, expected_indices)


def test_a_window_entirely_in_the_padding_gives_minus_infinity_and_pytorchs_index(device, load_program):
    # kernel 2, padding 1, dilation 5 on 4 positions: the first window's positions are -1 and 4
    model = Pool(lambda x: F.max_pool1d(x, 2, 1, 1, dilation=5, return_indices=True))
    program, forward = compile_and_load(model, torch.randn(2, 3, 4), load_program)
    x = torch.randn(2, 3, 4, device=device)
    assert_same(forward(model, x), model(x))


@pytest.mark.parametrize(
    ("function", "shape"),
    [
        (lambda x: F.max_pool1d(x, 3, 3, 1), (1, 1, 1)),
        (lambda x: F.max_pool2d(x, 3, 1, 1), (1, 1, 1, 1)),
        (lambda x: F.avg_pool1d(x, 3, 3, 1), (1, 1, 1)),
    ],
    ids=["max_pool1d", "max_pool2d", "avg_pool1d"],
)
@pytest.mark.parametrize("strategy", [("direct", 64, 16), ("tiled", 16, 2)], ids=["direct", "tiled"])
def test_an_input_of_one_element_pools_like_pytorch(function, shape, strategy, device, load_program):
    # every size is 1, so export fixes them all and the input is loaded once, not per lane
    model, example = Pool(function), torch.full(shape, 2.5)
    default, _ = compile_and_load(model, example, load_program)
    script = strategy_script(default.schedule, *strategy)
    program, forward = compile_and_load(model, example, load_program, schedule=script)
    for value in (-1.5, float("nan")):
        x = torch.full(shape, value, device=device)
        assert_same(forward(model, x), model(x))


@pytest.mark.parametrize(
    "layout",
    [lambda x: x.permute(0, 1, 3, 2), lambda x: x.contiguous(memory_format=torch.channels_last)],
    ids=["transposed", "channels_last"],
)
def test_strided_inputs_are_read_through_their_strides(layout, run_hybrid):
    model = Pool(lambda x: (F.max_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 2), F.adaptive_avg_pool2d(x, 1)))
    x = layout(torch.randn(3, 5, 11, 9))
    assert not x.is_contiguous()
    program, actual, expected = run_hybrid(model, (torch.randn(2, 5, 8, 8),), (x,))
    assert len(program.kernels) == 3 and program.kept_ops == ()
    assert_same(actual, expected)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_low_precision_pools_accumulate_in_float32(dtype, run_hybrid):
    model = Pool(lambda x: (F.max_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 3, 2, 1), F.adaptive_avg_pool2d(x, (1, 1))))
    program, actual, expected = run_hybrid(
        model, (torch.randn(2, 4, 8, 8, dtype=dtype),), (torch.randn(3, 4, 13, 11, dtype=dtype),)
    )
    assert program.kept_ops == ()
    assert all(value.dtype == dtype for value in actual)
    assert_same(actual, expected, atol=1e-2, rtol=1e-2)


class ScaledPoolSigmoid(nn.Module):
    """A prologue (per-channel scale, relu) and an epilogue (bias, sigmoid) around an average pool."""

    def __init__(self, channels: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(channels, 1, 1))
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))

    def forward(self, x):
        pooled = F.avg_pool2d(F.relu(x * self.scale), 3, 2, 1, count_include_pad=False)
        return torch.sigmoid(pooled + self.bias)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_prologue_and_epilogue_fuse_into_the_pool_kernel(dtype, run_hybrid):
    model = ScaledPoolSigmoid(3).to(dtype)
    program, actual, expected = run_hybrid(
        model, (torch.randn(2, 3, 8, 8, dtype=dtype),), (torch.randn(4, 3, 11, 9, dtype=dtype),)
    )
    assert program.schedule.startswith("kernel pool mul,relu,avg_pool2d,add,sigmoid ")
    assert len(program.kernels) == 1 and program.kept_ops == ()
    tolerance = 1e-4 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance)


def test_max_pool_epilogue_reads_the_pool_input_again(run_hybrid):
    model = Pool(lambda x: F.max_pool2d(x, 3, 1, 1) - x)
    program, actual, expected = run_hybrid(model, (torch.randn(2, 3, 8, 8),), (torch.randn(3, 2, 7, 9),))
    assert program.replaced_ops == ("aten.max_pool2d.default", "aten.sub.Tensor")
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("strategy", [("tiled", 8, 4), ("direct", 32, 16)], ids=["tiled", "direct"])
def test_non_default_schedules_compute_the_same_pools(strategy, device, load_program):
    model = ScaledPoolSigmoid(3).to(device)
    default, _ = compile_and_load(model, torch.randn(2, 3, 8, 8, device=device), load_program)
    script = strategy_script(default.schedule, *strategy)
    assert print_schedule(parse_schedule(script)) == script
    program, forward = compile_and_load(model, torch.randn(2, 3, 8, 8, device=device), load_program, schedule=script)
    assert program.schedule == script and program.kernel_block != default.kernel_block
    x = torch.randn(3, 3, 13, 7, device=device)
    torch.testing.assert_close(forward(model, x), model(x))


def test_global_average_pool_defaults_to_a_tiled_window(compile_model):
    program = compile_model(Pool(nn.AdaptiveAvgPool2d(1)), (torch.randn(2, 8, 32, 32),))
    assert re.fullmatch(r"kernel pool adaptive_avg_pool2d strategy=tiled block=\d+ window=1024 warps=\d+\n", program.schedule)


def test_the_same_graph_and_script_give_the_same_source(compile_model):
    first = compile_model(Pool(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True)), (torch.randn(2, 3, 9, 9),))
    second = compile_model(Pool(lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True)), (torch.randn(2, 3, 9, 9),))
    assert first.kernel_block == second.kernel_block


@pytest.mark.parametrize(
    "function, dtype",
    [
        (lambda x: F.adaptive_avg_pool2d(x, (None, 3)), torch.float32),  # an output size read from the input
        (lambda x: F.max_pool2d(x, 2), torch.float64),
    ],
    ids=["adaptive size from the input", "float64"],
)
def test_pools_it_does_not_compute_exactly_stay_in_pytorch(function, dtype, run_hybrid):
    program, actual, expected = run_hybrid(
        Pool(function), (torch.randn(2, 3, 8, 8, dtype=dtype),), (torch.randn(3, 2, 9, 7, dtype=dtype),)
    )
    assert program.kernels == () and len(program.kept_ops) == 1
    torch.testing.assert_close(actual, expected)


class RowScaledGlobalPool(nn.Module):
    """A global average pool whose prologue scales each row of the plane (a value varying along the width only)."""

    def __init__(self, width: int):
        super().__init__()
        self.scale = nn.Parameter(torch.randn(width))

    def forward(self, x):
        return F.adaptive_avg_pool2d(x * self.scale, 1)


@pytest.mark.parametrize(
    "layout",
    [
        lambda x: x,
        lambda x: x[..., ::2],
        lambda x: x.permute(0, 1, 3, 2),
        lambda x: x.contiguous(memory_format=torch.channels_last),
        lambda x: x[:, :, :1, :],
        lambda x: x[:, :, :, :1].transpose(2, 3).contiguous().transpose(2, 3),
    ],
    ids=[
        "contiguous", "every other column", "transposed", "channels_last", "one row of a plane", "one column rows apart",
    ],
)
def test_global_average_pools_read_contiguous_planes_flat_and_others_through_strides(layout, run_hybrid):
    model = Pool(lambda x: (F.adaptive_avg_pool2d(x, 1), F.adaptive_avg_pool3d(x, 1)))
    x = layout(torch.randn(3, 4, 13, 22))
    program, actual, expected = run_hybrid(model, (torch.randn(2, 4, 9, 10),), (x,))
    assert program.kept_ops == () and program.schedule.count("strategy=tiled") == 2
    assert program.kernel_block.count("PLANE_CONTIGUOUS=plane_contiguous") == 2
    assert_same(actual, expected)


def test_a_prologue_value_varying_along_part_of_the_plane_keeps_the_strided_positions(run_hybrid):
    model = RowScaledGlobalPool(10)
    program, actual, expected = run_hybrid(model, (torch.randn(2, 3, 9, 10),), (torch.randn(3, 2, 11, 10),))
    assert program.schedule.startswith("kernel pool mul,adaptive_avg_pool2d strategy=tiled ")
    assert "PLANE_CONTIGUOUS" not in program.kernel_block
    assert_same(actual, expected)


def test_a_global_pool_over_planes_whose_last_dim_is_one_reads_through_the_strides(run_hybrid):
    model = Pool(lambda x: F.adaptive_avg_pool3d(x, 1))
    program, actual, expected = run_hybrid(model, (torch.randn(2, 3, 8, 16, 1),), (torch.randn(3, 2, 9, 15, 1),))
    assert program.schedule.startswith("kernel pool adaptive_avg_pool3d strategy=tiled ")
    assert "PLANE_CONTIGUOUS" not in program.kernel_block  # a size-1 last dim has no stride to walk the plane by
    assert_same(actual, expected)
