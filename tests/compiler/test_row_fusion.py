"""The row template: hand-written row normalizations (RMS norm, softmax, layer norm, x / |x|) as one kernel
whose programs take whole rows, offered by the search against the default schedule's separate kernels.

Each module is captured at one size, compiled with the search's "row" alternative chosen, and run under
Triton's interpreter at odd other sizes, through both strategies.
"""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from drtriton_lsp.compiler.errors import ScheduleError
from drtriton_lsp.compiler.fragments import fragment_graph, search_steps, step_alternatives
from drtriton_lsp.compiler.planner import default_schedule
from drtriton_lsp.compiler.script import KernelLine, Schedule, parse_schedule, print_schedule
from drtriton_lsp.compiler.templates import TEMPLATES
from drtriton_lsp.engine.search import SearchBudget, search_schedule
from schedule_helpers import capture, compile_with, schedule_choosing

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter computes masked-off lanes too

TOLERANCES = {
    torch.float32: {"atol": 1e-4, "rtol": 1e-4},
    torch.float16: {"atol": 1e-2, "rtol": 1e-2},
    # Triton's interpreter truncates float32 -> bfloat16 rather than rounding to nearest
    torch.bfloat16: {"atol": 1.6e-2, "rtol": 1.6e-2},
}


class RmsNormResidual(nn.Module):
    """benchmarks/problems/fusion/rms_norm_residual.py: Llama's RMSNorm written out, plus the residual."""

    def __init__(self, hidden: int, dtype: torch.dtype):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(hidden).uniform_(0.5, 1.5).to(dtype))
        self.eps = 1e-6

    def forward(self, x, residual):
        hidden = x.to(torch.float32)
        variance = hidden.pow(2).mean(-1, keepdim=True)
        hidden = hidden * torch.rsqrt(variance + self.eps)
        return self.weight * hidden.to(x.dtype) + residual


class LayerNorm(nn.Module):
    """Layer norm with weight and bias written out: the variance reads the mean (two passes when looped)."""

    def __init__(self, hidden: int):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(hidden) + 0.5)
        self.bias = nn.Parameter(torch.randn(hidden))

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        variance = ((x - mean) ** 2).mean(-1, keepdim=True)
        return (x - mean) / torch.sqrt(variance + 1e-5) * self.weight + self.bias


class Function(nn.Module):
    def __init__(self, function):
        super().__init__()
        self.function = function

    def forward(self, x):
        return self.function(x)


class PerRowInputs(nn.Module):
    """Inputs with one value per row, read by ops over the rows and by ops on per-row values (kept dims or not)."""

    def forward(self, x, scale, offset):
        shifted = x * scale - x.amax(-1, keepdim=True) * scale
        return shifted / (shifted.abs().sum(-1, keepdim=True) + scale.abs()), x.sum(-1) * offset


def standardize_last_two_dims(x):
    return (x - x.mean((-2, -1), keepdim=True)) * torch.rsqrt(x.var((-2, -1), keepdim=True) + 1e-5)


def softmax(x):
    exponentials = torch.exp(x - x.amax(-1, keepdim=True))
    return exponentials / exponentials.sum(-1, keepdim=True)


def log_softmax(x):
    shifted = x - x.amax(-1, keepdim=True)
    return shifted - torch.log(torch.exp(shifted).sum(-1, keepdim=True))


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def row_schedule(graph, strategy: str | None = None) -> str:
    """The default schedule with the search's "row" alternative chosen wherever it is offered (its strategy
    replaced by `strategy` if given)."""

    def with_strategy(line: KernelLine) -> KernelLine:
        return KernelLine(line.template, line.nodes, (("strategy", strategy),) + line.params[1:])

    return schedule_choosing(graph, "row", None if strategy is None else with_strategy, required=True)


@pytest.fixture
def run_rows(load_program, device):
    """Compile `model` at the example inputs with its row groups in row kernels, run it at `test_inputs`,
    and compare with PyTorch. Returns the program."""

    def run(model: nn.Module, example_inputs: tuple, test_inputs: tuple, *, strategy=None, dtype=torch.float32):
        model = model.eval().to(device)
        graph = capture(model, tuple(value.to(device) for value in example_inputs))
        program = compile_with(graph, row_schedule(graph, strategy))
        assert "kernel row " in program.schedule and program.kept_ops == ()
        forward = getattr(load_program(program), program.forward_function)
        test_inputs = tuple(value.to(device) for value in test_inputs)
        with torch.no_grad():
            expected = model(*test_inputs)
            actual = forward(model, *test_inputs)
        for got, want in zip(*(result if isinstance(result, tuple) else (result,) for result in (actual, expected))):
            assert got.dtype == want.dtype and got.shape == want.shape
            torch.testing.assert_close(got, want, **TOLERANCES[want.dtype])
        return program

    return run


# name: () -> (module, capture inputs, test inputs at odd sizes: another row count, and another row length
# where the graph leaves it free), drawn inside the test so the seeded generator makes them
CASES = {
    "rms norm with residual": lambda: (
        RmsNormResidual(13, torch.float32),
        (randn(4, 13), randn(4, 13)),
        (randn(5, 13), randn(5, 13)),
    ),
    "softmax": lambda: (Function(softmax), (randn(4, 6),), (randn(3, 37) * 4,)),
    "log_softmax": lambda: (Function(log_softmax), (randn(4, 6),), (randn(3, 37) * 4,)),
    "layer norm with affine": lambda: (LayerNorm(21), (randn(4, 21),), (randn(7, 21) * 3 + 1,)),
    "x / x.norm(dim=-1)": lambda: (Function(lambda x: x / x.norm(dim=-1, keepdim=True)), (randn(4, 6),), (randn(3, 29),)),
    "last two dims of a 3-D tensor": lambda: (Function(standardize_last_two_dims), (randn(2, 3, 4),), (randn(3, 5, 7),)),
    "mean and std in one pass": lambda: (
        Function(lambda x: (x - x.mean(-1, keepdim=True)) / x.std(-1, keepdim=True)),
        (randn(4, 6),),
        (randn(5, 19) + 100,),
    ),
    "per-row results returned": lambda: (
        Function(lambda x: (x / (x.sum(-1, keepdim=True).abs() + 1), torch.logsumexp(x, -1), x.amax(-1, keepdim=True) * 2)),
        (randn(4, 6),),
        (randn(5, 23),),
    ),
    "per-row inputs": lambda: (
        PerRowInputs(),
        (randn(4, 6), randn(4, 1), randn(4)),
        (randn(5, 23), randn(5, 1), randn(5)),
    ),
}


@pytest.mark.parametrize("strategy", [None, "loop16"], ids=["default (single)", "loop16"])
@pytest.mark.parametrize("case", list(CASES), ids=list(CASES))
def test_row_kernel_matches_pytorch_at_new_sizes(case, strategy, run_rows):
    model, example_inputs, test_inputs = CASES[case]()
    program = run_rows(model, example_inputs, test_inputs, strategy=strategy)
    assert len(program.kernels) == 1
    # every row of 19 to 37 elements takes several 16-column chunks
    assert ("for column_start in range(" in program.kernel_block) == (strategy is not None)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("strategy", [None, "loop16"], ids=["single", "loop16"])
def test_rms_norm_in_half_precision_rounds_where_pytorch_rounds(dtype, strategy, run_rows):
    model = RmsNormResidual(37, dtype)
    example = (randn(4, 37, dtype=dtype), randn(4, 37, dtype=dtype))
    program = run_rows(model, example, (randn(5, 37, dtype=dtype), randn(5, 37, dtype=dtype)), strategy=strategy)
    # to_1 is rounded before mul_1 reads it, mul_1 before add_1 does (bfloat16 by the helper that rounds to nearest
    # under Triton's interpreter too, where a cast truncates)
    block = program.kernel_block
    if dtype == torch.bfloat16:
        assert len(re.findall(r"(?<!def )(?<!\w)\w+_round_to_bfloat16\(", block)) == 2
    else:
        assert block.count(".to(tl.float16).to(tl.float32)") == 2


def test_softmax_in_half_precision(run_rows):
    program = run_rows(Function(softmax), (randn(4, 6, dtype=torch.float16),), (randn(3, 37, dtype=torch.float16) * 4,))
    assert "tl.float16" in program.kernel_block


def test_a_non_contiguous_input_is_read_through_its_strides(run_rows):
    test_input = torch.randn(23, 5).t()  # rows of 23 lie 1 apart, elements 5 apart
    assert not test_input.is_contiguous()
    for strategy in (None, "loop16"):
        run_rows(LayerNorm(23), (randn(4, 23),), (test_input,), strategy=strategy)
    permuted = torch.randn(7, 3, 5).permute(1, 2, 0)
    run_rows(Function(standardize_last_two_dims), (randn(2, 3, 4),), (permuted,), strategy="loop16")


def test_rows_per_program_and_a_dynamic_row_count(load_program, device):
    graph = capture(Function(softmax), (randn(4, 6),))
    assert isinstance(graph.nodes[0].spec.shape[0], str)  # the row count is a symbol
    script = row_schedule(graph).replace("rows=1", "rows=4")
    program = compile_with(graph, script)
    forward = getattr(load_program(program), program.forward_function)
    for rows in (1, 5, 9):
        x = randn(rows, 11, dtype=torch.float32).to(device)
        torch.testing.assert_close(forward(None, x), softmax(x))


def test_the_search_offers_one_row_kernel_for_the_rms_norm_lines():
    graph = capture(RmsNormResidual(13, torch.bfloat16), (randn(4, 13, dtype=torch.bfloat16),) * 2)
    base = default_schedule(graph)
    (step,) = search_steps(graph, base)
    assert step.positions == (0, 1, 2)
    alternatives = step_alternatives(graph, step)
    labels = [label for label, _ in alternatives]
    assert labels[:4] == ["default", "row", "pytorch", "row warps=2"]
    assert "row strategy=loop1024" in labels and "reduce mean strategy=loop" in labels
    assert len(labels) == len(set(labels))
    fragment = fragment_graph(graph, step.nodes)
    for _, lines in alternatives:
        compile_with(fragment, print_schedule(Schedule(lines)))
    assert len(compile_with(fragment, print_schedule(Schedule(dict(alternatives)["row"]))).kernels) == 1
    assert len(compile_with(fragment, print_schedule(Schedule(step.lines))).kernels) == 3

    def row_is_fastest(task, fragment, candidates, stop):
        return 1.0, [(True, "", 0.5 if "one value per row, as a column" in source else 2.0) for source in candidates]

    result = search_schedule(graph, base, name="model", measure=row_is_fastest, budget=SearchBudget())
    assert result.fragments[0].chosen == "row" and result.fragments[0].line == 1
    assert result.schedule == "kernel row to,pow_1,mean,add,rsqrt,mul,to_1,mul_1,add_1 strategy=single rows=1 warps=1\n"
    assert len(compile_with(graph, result.schedule).kernels) == 1


def test_row_runs_stop_at_lines_over_other_rows():
    """A kernel over other rows between two row groups splits them into two search steps."""

    def two_softmaxes(x):
        return softmax(softmax(x).t() * 2)

    graph = capture(Function(two_softmaxes), (randn(4, 6),))
    steps = search_steps(graph, default_schedule(graph))
    row_steps = [step for step in steps if "row" in dict(step_alternatives(graph, step))]
    assert len(row_steps) == 2 and all(len(step.positions) >= 3 for step in row_steps)


# the default schedule of each graph, as before the row template existed (the search alone offers it)
DEFAULT_SCHEDULES = {
    "rms norm with residual": (
        "kernel pointwise to,pow_1 block=1024 warps=4\n"
        "kernel reduce mean,add,rsqrt strategy=single block=16 splits=1 rows=1 warps=1\n"
        "kernel pointwise mul,to_1,mul_1,add_1 block=1024 warps=4\n"
    ),
    "softmax": (
        "kernel reduce amax strategy=single block=16 splits=1 rows=1 warps=1\n"
        "kernel pointwise sub,exp block=1024 warps=4\n"
        "kernel reduce sum_1 strategy=single block=16 splits=1 rows=1 warps=1\n"
        "kernel pointwise div block=1024 warps=4\n"
        "replay cuda_graph\n"
    ),
    "layer norm with affine": (
        "kernel reduce mean strategy=single block=32 splits=1 rows=1 warps=1\n"
        "kernel reduce sub,pow_1,mean_1,add,sqrt strategy=single block=32 splits=1 rows=1 warps=1\n"
        "kernel pointwise sub_1,div,mul,add_1 block=1024 warps=4\n"
    ),
    "x / x.norm(dim=-1)": (
        "kernel reduce linalg_vector_norm strategy=single block=16 splits=1 rows=1 warps=1\n"
        "kernel pointwise div block=1024 warps=4\n"
    ),
}


@pytest.mark.parametrize("case", list(DEFAULT_SCHEDULES), ids=list(DEFAULT_SCHEDULES))
def test_the_default_schedule_is_unchanged(case):
    model, example_inputs, _ = CASES[case]()
    assert print_schedule(default_schedule(capture(model, example_inputs))) == DEFAULT_SCHEDULES[case]


def test_a_row_line_round_trips_and_decodes_to_the_same_source():
    graph = capture(Function(softmax), (randn(4, 6),))
    script = row_schedule(graph, "loop256")
    # the default's replay line stays (four steps), though the row line now computes them all in one
    assert script == "kernel row amax,sub,exp,sum_1,div strategy=loop256 rows=1 warps=1\nreplay cuda_graph\n"
    assert print_schedule(parse_schedule(script)) == script
    assert compile_with(graph, script).kernel_block == compile_with(graph, script).kernel_block
    with pytest.raises(ScheduleError, match="line 1: kernel row, parameter strategy: expected single or loop<N>"):
        parse_schedule("kernel row amax,sub,exp,sum_1,div strategy=whole rows=1 warps=1\n")


def test_default_parameters_follow_the_row_length():
    row = TEMPLATES["row"]
    short = capture(Function(softmax), (randn(4096, 64),))
    long = capture(Function(softmax), (randn(16, 16384),))
    short_line = parse_schedule(row_schedule(short)).steps[0]
    long_line = parse_schedule(row_schedule(long)).steps[0]
    assert short_line.parameters == {"strategy": "single", "rows": 8, "warps": 1}
    assert long_line.parameters == {"strategy": "loop4096", "rows": 1, "warps": 16}
    # one step away first: more rows, fewer warps; then whole rows, and half or twice the chunk
    variants = row.search_parameters(long_line.parameters)
    assert variants[:5] == [
        {**long_line.parameters, **change}
        for change in (
            {"rows": 2}, {"warps": 8}, {"strategy": "single"}, {"strategy": "loop2048"}, {"strategy": "loop8192"}
        )
    ]


# name: (function of x, input, script lines, the error's words)
ERRORS = {
    "a reduction over leading dims": (
        lambda x: x - x.sum(0, keepdim=True),
        randn(4, 6),
        "kernel row sum_1,sub strategy=single rows=1 warps=1\n",
        "line 1: kernel row: sum_1 reduces dim 0 of [s77, s27], which are not its trailing dims",
    ),
    "two reductions over different dims": (
        lambda x: x - x.amax(-1, keepdim=True) - x.sum((-2, -1), keepdim=True),
        randn(3, 4, 6),
        "kernel row amax,sub,sum_1,sub_1 strategy=single rows=1 warps=1\n",
        "sum_1 reduces dims 1, 2 of [s77, s27, s53], not the rows amax folds (dim 2 of [s77, s27, s53])",
    ),
    "a per-row value without its reduced dim, read across a row": (
        lambda x: x / x.sum(-1),
        randn(6, 6),
        "kernel row sum_1,div strategy=single rows=1 warps=1\n",
        "div reads sum_1 ([s27]), one value per row without the reduced dims, which broadcasts along the rows",
    ),
    "an op neither over the rows nor per row": (
        lambda x: x - x.amax(-1, keepdim=True) + x[:1] * 2,
        randn(4, 6),
        "kernel row amax,sub,mul,add strategy=single rows=1 warps=1\n",
        "mul computes a [1, s27] tensor: neither the rows ([s77, s27]) nor one value per row ([s77, 1] or [s77])",
    ),
    "indices": (
        lambda x: x.argmax(-1),
        randn(4, 6),
        "kernel row argmax strategy=single rows=1 warps=1\n",
        "argmax (aten.argmax.default) returns indices",
    ),
    "no reduction": (
        lambda x: torch.relu(x) * 2,
        randn(4, 6),
        "kernel row relu,mul strategy=single rows=1 warps=1\n",
        "kernel row: it computes no reduction",
    ),
    "an op that is not elementwise": (
        lambda x: (x @ x.t()).sum(-1, keepdim=True),
        randn(4, 6),
        "kernel row matmul,sum_1 strategy=single rows=1 warps=1\n",
        "matmul (aten.matmul.default) is neither elementwise nor a reduction the reduce template computes",
    ),
}


@pytest.mark.parametrize("case", list(ERRORS), ids=list(ERRORS))
def test_a_row_line_that_does_not_fit_says_which_op_and_why(case):
    function, example, script, words = ERRORS[case]
    graph = capture(Function(function), (example,))
    with pytest.raises(ScheduleError) as raised:
        compile_with(graph, script)
    assert words in str(raised.value)
