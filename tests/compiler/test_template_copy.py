"""The copy template: cat, stack and repeat against PyTorch, at odd sizes and a new batch.

Copies must be exact (bitwise), also for strided inputs and half precision, with an epilogue fused after them.
"""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.worker.capture import capture_graph

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter computes masked-off lanes too


class Copy(nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x, y):
        return self.function(x, y)


def normal(*shape, dtype=torch.float32):
    return torch.randn(shape).to(dtype)


# name -> (function, op, shapes of x and y at capture, at test)
COPY_CASES = {
    "cat dim 1": (lambda x, y: torch.cat([x, y], dim=1), "aten.cat.default", ((4, 6), (4, 3)), ((7, 13), (7, 5))),
    "cat dim 0, a piece twice": (
        lambda x, y: torch.cat([x, y, x]), "aten.cat.default", ((4, 6), (5, 6)), ((7, 13), (3, 13))
    ),
    "cat dim -1 of 3-d": (
        lambda x, y: torch.cat([x, y], dim=-1), "aten.cat.default", ((2, 4, 6), (2, 4, 3)), ((3, 7, 13), (3, 7, 5))
    ),
    "stack dim 0": (lambda x, y: torch.stack([x, y, x]), "aten.stack.default", ((4, 6), (4, 6)), ((7, 13), (7, 13))),
    "stack dim 1": (lambda x, y: torch.stack([x, y], dim=1), "aten.stack.default", ((4, 6), (4, 6)), ((7, 13), (7, 13))),
    "stack last dim": (lambda x, y: torch.stack([x, y], dim=2), "aten.stack.default", ((4, 6), (4, 6)), ((7, 13), (7, 13))),
    "repeat with new dims": (lambda x, y: x.repeat(2, 1, 3), "aten.repeat.default", ((4, 6), (1,)), ((7, 13), (1,))),
    "repeat same rank": (lambda x, y: x.repeat(3, 2), "aten.repeat.default", ((4, 6), (1,)), ((7, 13), (1,))),
}


@pytest.mark.parametrize("case", list(COPY_CASES), ids=list(COPY_CASES))
def test_copy_matches_pytorch_exactly_at_a_new_size(case, run_hybrid):
    function, op, capture_shapes, test_shapes = COPY_CASES[case]
    program, actual, expected = run_hybrid(
        Copy(function), tuple(normal(*shape) for shape in capture_shapes), tuple(normal(*shape) for shape in test_shapes)
    )
    assert program.replaced_ops == (op,) and program.kept_ops == ()
    assert torch.equal(actual, expected)


def test_strided_pieces_are_read_through_their_strides(run_hybrid):
    model = Copy(lambda x, y: (torch.cat([x, y]), torch.stack([x, x.t().t()], dim=1), x.repeat(2, 2)))
    transposed = normal(13, 7).t()
    program, actual, expected = run_hybrid(model, (normal(4, 6), normal(5, 6)), (transposed, normal(3, 13)))
    assert program.kept_ops == ()
    for got, want in zip(actual, expected, strict=True):
        assert torch.equal(got, want)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_copies_are_exact(dtype, run_hybrid):
    model = Copy(lambda x, y: torch.cat([x, y], dim=1))
    program, actual, expected = run_hybrid(
        model, (normal(4, 6, dtype=dtype), normal(4, 3, dtype=dtype)), (normal(7, 13, dtype=dtype), normal(7, 5, dtype=dtype))
    )
    assert actual.dtype == dtype and torch.equal(actual, expected)


def test_an_epilogue_fuses_after_the_copy(run_hybrid):
    model = Copy(lambda x, y: torch.relu(torch.cat([x, y], dim=-1)) * 2 + 1)
    program, actual, expected = run_hybrid(model, (normal(4, 6), normal(4, 3)), (normal(7, 13), normal(7, 5)))
    assert program.schedule.startswith("kernel copy cat,relu,mul,add ") and len(program.kernels) == 1
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("case", ["cat dim 0, a piece twice", "stack dim 1", "repeat with new dims"])
def test_offsets_split_in_int32_or_int64_index_the_same_elements(case, load_program, device):
    """Past 2**31 output elements the offsets are split in int64: the same kernel with the int32 split turned off."""
    function, _, capture_shapes, test_shapes = COPY_CASES[case]
    model = Copy(function)
    graph = capture_graph(model.eval(), tuple(normal(*shape) for shape in capture_shapes))
    program = compile_graph(graph, prefix="model", forward_params=["x", "y"], has_self=True)
    assert program.kernel_block.count("INT32_INDICES=numel + BLOCK <= 2**31") == 1
    wide = program.__class__(**{
        **program.__dict__,
        "kernel_block": program.kernel_block.replace("INT32_INDICES=numel + BLOCK <= 2**31", "INT32_INDICES=False"),
    })  # fmt: skip
    x, y = (normal(*shape).to(device) for shape in test_shapes)
    for variant in (program, wide):
        assert torch.equal(getattr(load_program(variant), variant.forward_function)(model, x, y), model(x, y))


@pytest.mark.parametrize("parameters", ["block=64 warps=1", "block=8192 warps=8"])
def test_non_default_schedules_copy_the_same(parameters, load_program, device):
    model = Copy(lambda x, y: torch.stack([x, y], dim=1))
    graph = capture_graph(model.eval(), (normal(4, 6), normal(4, 6)))
    default = compile_graph(graph, prefix="model", forward_params=["x", "y"], has_self=True)
    script = re.sub(r"block=\d+ warps=\d+", parameters, default.schedule)
    assert script != default.schedule
    program = compile_graph(graph, prefix="model", forward_params=["x", "y"], has_self=True, schedule=script)
    assert program.schedule == script
    x, y = normal(7, 13).to(device), normal(7, 13).to(device)
    assert torch.equal(getattr(load_program(program), program.forward_function)(model, x, y), model(x, y))


@pytest.mark.parametrize(
    "function, inputs",
    [
        (lambda x, y: torch.cat([x, y]), (torch.randint(0, 9, (4, 6)), torch.randint(0, 9, (5, 6)))),
        (lambda x, y: torch.cat([x, y]), (normal(4, 6), normal(5, 6, dtype=torch.float16))),
    ],
    ids=["integers", "mixed dtypes"],
)
def test_copies_it_does_not_compute_exactly_stay_in_pytorch(function, inputs, compile_model):
    program = compile_model(Copy(function), inputs)
    assert program.kernels == () and program.kept_ops == ("aten.cat.default",)


def test_a_cat_of_values_pytorch_computed_is_left_to_pytorch(compile_model):
    # flip has no template: the cat kernel would only copy PyTorch's results, so nothing would come from Triton
    program = compile_model(Copy(lambda x, y: torch.cat([x.flip(0), y])), (normal(4, 6), normal(5, 6)))
    assert program.kernels == ()
    assert program.kept_copies == ("aten.cat.default",)


def test_a_cat_beside_a_kernel_that_computes_stays_a_copy_kernel(compile_model):
    program = compile_model(Copy(lambda x, y: (torch.cat([x.flip(0), y]), torch.exp(y))), (normal(4, 6), normal(5, 6)))
    assert sorted(program.replaced_ops) == ["aten.cat.default", "aten.exp.default"]
