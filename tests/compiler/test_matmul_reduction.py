"""A matmul kernel that folds a sum, mean, amax, amin or logsumexp over its output's last dim, offered to the search.

Each module is compiled with the search's "fused reduction" alternative, captured at one size and run at odd others.
"""

from __future__ import annotations


import pytest
import torch
import torch.nn.functional as F
from torch import nn

from drtriton_lsp.compiler.errors import ScheduleError
from drtriton_lsp.compiler.fragments import fragment_graph, search_steps, step_alternatives
from drtriton_lsp.compiler.planner import default_schedule
from drtriton_lsp.compiler.script import Schedule, parse_schedule, print_schedule
from drtriton_lsp.engine.search import SearchBudget, search_schedule
from schedule_helpers import capture, compile_with, schedule_choosing

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter computes masked-off lanes too

FLOAT32 = {"atol": 1e-4, "rtol": 1e-4}
TOLERANCES = {
    torch.float32: FLOAT32,
    torch.float16: {"atol": 1e-2, "rtol": 1e-2},
    # Triton's interpreter truncates float32 -> bfloat16 rather than rounding to nearest
    torch.bfloat16: {"atol": 1.6e-2, "rtol": 1.6e-2},
}
DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


class Function(nn.Module):
    """A module around a function of the forward's inputs and its parameters."""

    def __init__(self, function, **parameters):
        super().__init__()
        self.function = function
        for name, value in parameters.items():
            setattr(self, name, nn.Parameter(value))

    def forward(self, x, y):
        return self.function(self, x, y)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def fused_schedule(graph) -> str:
    """The default schedule with the search's "fused reduction" alternative chosen wherever it is offered."""
    return schedule_choosing(graph, "fused reduction")


@pytest.fixture
def run_fused(load_program, device):
    """Compile `model` with its reductions folded into matmul kernels, run it at `test_inputs`."""

    def run(model: nn.Module, example_inputs: tuple, test_inputs: tuple):
        model = model.eval().to(device)
        graph = capture(model, tuple(value.to(device) for value in example_inputs))
        program = compile_with(graph, fused_schedule(graph))
        module = load_program(program)
        test_inputs = tuple(value.to(device) for value in test_inputs)
        with torch.no_grad():
            expected = model(*test_inputs)
            actual = getattr(module, program.forward_function)(model, *test_inputs)
        return program, actual, expected

    return run


class Linear(nn.Module):
    """`nn.Linear` (a fixed N of 19 columns) followed by `finish` on its output; y is a second input."""

    def __init__(self, finish, dtype=torch.float32):
        super().__init__()
        self.fc = nn.Linear(13, 19).to(dtype)
        self.finish = finish

    def forward(self, x, y):
        return self.finish(self.fc(x), y)


# name: (model of dtype, capture inputs of dtype, test inputs of dtype: odd sizes)
CASES = {
    "sum(relu(x @ w.T + b), -1)": (
        lambda dtype: Function(
            lambda m, x, y: torch.sum(F.relu(x @ m.w.T + m.b), dim=-1), w=randn(19, 13, dtype=dtype), b=randn(19, dtype=dtype)
        ),
        lambda dtype: (randn(4, 13, dtype=dtype), randn(4, dtype=dtype)),
        lambda dtype: (randn(37, 13, dtype=dtype), randn(37, dtype=dtype)),
    ),
    "(x @ w).amax(-1, keepdim=True)": (
        lambda dtype: Function(lambda m, x, y: (x @ m.w).amax(dim=-1, keepdim=True), w=randn(13, 19, dtype=dtype)),
        lambda dtype: (randn(4, 13, dtype=dtype), randn(4, dtype=dtype)),
        lambda dtype: (randn(37, 13, dtype=dtype), randn(37, dtype=dtype)),
    ),
    "logsumexp(q @ k.transpose(-1, -2), -1)": (
        lambda dtype: Function(lambda m, q, k: torch.logsumexp(q @ k.transpose(-1, -2), -1)),
        lambda dtype: (randn(2, 4, 6, dtype=dtype), randn(2, 5, 6, dtype=dtype)),
        lambda dtype: (randn(3, 7, 13, dtype=dtype), randn(3, 9, 13, dtype=dtype)),
    ),
    "linear(x).mean(-1)": (
        lambda dtype: Linear(lambda out, y: out.mean(-1), dtype),
        lambda dtype: (randn(2, 4, 13, dtype=dtype), randn(4, dtype=dtype)),
        lambda dtype: (randn(3, 7, 13, dtype=dtype), randn(7, dtype=dtype)),
    ),
    "sigmoid(linear(x).amin(-1)) * y": (
        lambda dtype: Linear(lambda out, y: torch.sigmoid(out.amin(-1)) * y, dtype),
        lambda dtype: (randn(4, 13, dtype=dtype), randn(4, dtype=dtype)),
        lambda dtype: (randn(37, 13, dtype=dtype), randn(37, dtype=dtype)),
    ),
    "bmm(x, y).sum(-1, keepdim=True)": (
        lambda dtype: Function(lambda m, x, y: torch.bmm(x, y).sum(-1, keepdim=True) / 4),
        lambda dtype: (randn(2, 4, 6, dtype=dtype), randn(2, 6, 5, dtype=dtype)),
        lambda dtype: (randn(3, 7, 13, dtype=dtype), randn(3, 13, 9, dtype=dtype)),
    ),
}


@pytest.mark.parametrize("dtype", list(DTYPES), ids=list(DTYPES))
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_the_fused_reduction_matches_pytorch_at_odd_sizes(case, dtype, run_fused):
    make_model, capture_inputs, test_inputs = CASES[case]
    dtype = DTYPES[dtype]
    program, actual, expected = run_fused(make_model(dtype), capture_inputs(dtype), test_inputs(dtype))
    assert len(program.kernels) == 1 and not program.kept_ops, program.schedule
    assert program.schedule.startswith("kernel matmul ") and "kernel reduce" not in program.schedule
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, **TOLERANCES[dtype])


def test_the_product_is_stored_too_when_another_op_reads_it(run_fused):
    def product_and_row_sums(m, x, y):
        product = x @ m.w
        return product, product.sum(-1)

    model = Function(product_and_row_sums, w=randn(13, 19))
    program, actual, expected = run_fused(model, (randn(4, 13), randn(4)), (randn(37, 13), randn(37)))
    assert len(program.kernels) == 1
    assert "    matmul, sum_1 = model_fused_matmul_sum(x, drtriton_module_tensors['w'])\n" in program.kernel_block
    for got, want in zip(actual, expected):
        torch.testing.assert_close(got, want, **FLOAT32)


def test_a_free_n_longer_than_the_tile_widens_it_at_run_time(run_fused):
    # captured with 5 keys (tile N 16), run with 40: each row must still be whole in one program
    model = CASES["logsumexp(q @ k.transpose(-1, -2), -1)"][0](torch.float32)
    program, actual, expected = run_fused(model, (randn(2, 4, 6), randn(2, 5, 6)), (randn(3, 7, 13), randn(3, 40, 13)))
    assert "BLOCK_N = max(16, triton.next_power_of_2(columns))" in program.kernel_block
    torch.testing.assert_close(actual, expected, **FLOAT32)


def linear_sum_graph():
    return capture(Linear(lambda out, y: F.relu(out).sum(-1)), (randn(4, 13), randn(4)))


def test_the_default_schedule_keeps_the_matmul_and_the_reduction_apart():
    graph = linear_sum_graph()
    assert print_schedule(default_schedule(graph)) == (
        "kernel matmul linear,relu tile=16x32x16 group=8 warps=4 stages=3 precision=ieee loads=pointers\n"
        "kernel reduce sum_1 strategy=single block=32 splits=1 rows=1 warps=1\n"
    )
    for make_model, capture_inputs, _ in CASES.values():
        schedule = default_schedule(capture(make_model(torch.float32), capture_inputs(torch.float32)))
        assert [line.template for line in schedule.kernels] == ["matmul", "reduce"], print_schedule(schedule)


def test_a_fused_line_round_trips_and_decodes_to_the_same_source():
    graph = linear_sum_graph()
    script = fused_schedule(graph)
    assert script == "kernel matmul linear,relu,sum_1 tile=16x32x16 group=8 warps=4 stages=3 precision=ieee loads=pointers\n"
    assert print_schedule(parse_schedule(script)) == script
    program = compile_with(graph, script)
    assert program.schedule == script and program.kernel_block == compile_with(graph, script).kernel_block
    assert program.replaced_ops == ("aten.linear.default", "aten.relu.default", "aten.sum.dim_IntList")


REJECTED_LINES = {
    "N wider than the tile": (
        lambda out, y: F.relu(out).sum(-1),
        "kernel matmul linear,relu,sum_1 tile=16x16x16 group=8 warps=4 stages=3 precision=ieee loads=pointers\n",
        "line 1: kernel matmul: sum_1 (aten.sum.dim_IntList) folds rows of 19 columns, more than the tile's N (16): "
        "rows would span several programs",
    ),
    "a reduction over rows": (
        lambda out, y: out.sum(0),
        "kernel matmul linear,sum_1 tile=16x32x16 group=8 warps=4 stages=3 precision=ieee loads=pointers\n",
        "line 1: kernel matmul: sum_1 (aten.sum.dim_IntList) reduces dim 0 of linear; a matmul kernel folds only the last dim",
    ),
    "a reduction it does not fold": (
        lambda out, y: out.var(-1),
        "kernel matmul linear,var tile=16x32x16 group=8 warps=4 stages=3 precision=ieee loads=pointers\n",
        "line 1: kernel matmul: var (aten.var.dim) is not a sum, mean, amax, amin or logsumexp",
    ),
    "an op after the reduction in the tile's shape": (
        lambda out, y: out.sum(-1, keepdim=True) + out,
        "kernel matmul linear,sum_1,add tile=16x32x16 group=8 warps=4 stages=3 precision=ieee loads=pointers\n",
        "line 1: kernel matmul: op add after the reduction is not in sum_1's output shape",
    ),
}


@pytest.mark.parametrize("case", list(REJECTED_LINES), ids=list(REJECTED_LINES))
def test_a_reduction_the_kernel_cannot_fold_is_rejected_with_the_reason(case):
    finish, script, reason = REJECTED_LINES[case]
    graph = capture(Linear(finish), (randn(4, 13), randn(4)))
    with pytest.raises(ScheduleError) as raised:
        compile_with(graph, script)
    assert raised.value.message.startswith(reason), raised.value.message


def test_an_op_after_the_reduction_may_not_read_the_unreduced_tile():
    def row_sums_plus_product(m, x, y):
        product = x @ m.w
        return product.sum(-1, keepdim=True) + product

    # one column: the kept row sums have the product's shape, so only what add reads tells them apart
    graph = capture(Function(row_sums_plus_product, w=randn(13, 1)), (randn(4, 13), randn(4)))
    script = "kernel matmul matmul,sum_1,add tile=16x16x16 group=8 warps=4 stages=3 precision=ieee loads=pointers\n"
    with pytest.raises(ScheduleError) as raised:
        compile_with(graph, script)
    assert raised.value.message == (
        "line 1: kernel matmul: op add after the reduction reads matmul, a value of the unreduced tile"
    )


def test_rows_longer_than_the_widest_tile_are_never_fused():
    graph = capture(Function(lambda m, x, y: (x @ m.w).amax(-1), w=randn(13, 300)), (randn(4, 13), randn(4)))
    script = "kernel matmul matmul,amax tile=16x256x16 group=8 warps=4 stages=3 precision=ieee loads=pointers\n"
    with pytest.raises(ScheduleError, match=r"folds rows of 300 columns, more than the tile's N \(256\)"):
        compile_with(graph, script)
    (step,) = search_steps(graph, default_schedule(graph))
    assert "fused reduction" not in dict(step_alternatives(graph, step))


def test_the_search_offers_the_fused_reduction_against_the_two_kernels():
    graph = linear_sum_graph()
    base = default_schedule(graph)
    (step,) = search_steps(graph, base)
    assert step.positions == (0, 1) and step.nodes == ("linear", "relu", "sum_1")
    alternatives = step_alternatives(graph, step)
    labels = [label for label, _ in alternatives]
    assert labels[:3] == ["default", "fused reduction", "pytorch"]
    assert "fused reduction tile=16x32x32" in labels and "matmul stages=2" in labels and "reduce rows=2" in labels
    fragment = fragment_graph(graph, step.nodes)
    for label, lines in alternatives:
        program = compile_with(fragment, print_schedule(Schedule(lines)))
        assert len(program.kernels) == 1 or not label.startswith("fused reduction")

    def fused_is_fastest(task, fragment, candidates, stop):
        return 1.0, [(True, "", 0.5 if "folds each of its rows" in source else 2.0) for source in candidates]

    result = search_schedule(graph, base, name="t", measure=fused_is_fastest, budget=SearchBudget())
    assert result.fragments[0].chosen == "fused reduction"
    assert result.schedule == dict(alternatives)["fused reduction"][0].render() + "\n"
    assert len(compile_with(graph, result.schedule).kernels) == 1
