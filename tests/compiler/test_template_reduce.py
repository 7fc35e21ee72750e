"""The reduce and scan templates against PyTorch: every overload at odd sizes through strided views,
special values, low precision, prologues, epilogues, and schedules other than the default.
"""

from __future__ import annotations

import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.errors import ScheduleError
from drtriton_lsp.compiler.script import KernelLine, Schedule, parse_schedule, print_schedule
from drtriton_lsp.worker.capture import capture_graph

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter computes masked-off lanes too

CAPTURE_SHAPE = (4, 6, 5)


def strided_input(dtype=torch.float32):
    """A [3, 5, 7] input that is a permuted view (no dim contiguous in order) of odd sizes."""
    return torch.randn(7, 3, 5).permute(1, 2, 0).to(dtype)


class Function(nn.Module):
    def __init__(self, function, **parameters):
        super().__init__()
        self.function = function
        for name, value in parameters.items():
            self.register_parameter(name, nn.Parameter(value))

    def forward(self, x):
        return self.function(self, x)


REDUCTIONS = {
    "aten.sum.dim_IntList": lambda m, x: x.sum(1),
    "aten.sum.dim_IntList[dims 0, 2, keepdim]": lambda m, x: x.sum((0, 2), keepdim=True),
    "aten.sum.default": lambda m, x: x.sum(),
    "aten.mean.dim": lambda m, x: x.mean(-1),
    "aten.mean.default": lambda m, x: x.mean(),
    "aten.amax.default": lambda m, x: x.amax(-1),
    "aten.amin.default[dims 0, 1]": lambda m, x: x.amin((0, 1)),
    "aten.max.dim": lambda m, x: x.max(1),
    "aten.min.dim[keepdim]": lambda m, x: x.min(2, keepdim=True),
    "aten.max.default": lambda m, x: x.max(),
    "aten.min.default": lambda m, x: x.min(),
    "aten.argmax.default": lambda m, x: x.argmax(1),
    "aten.argmax.default[flattened]": lambda m, x: x.argmax(),
    "aten.argmin.default[keepdim]": lambda m, x: x.argmin(2, keepdim=True),
    "aten.prod.dim_int": lambda m, x: x.prod(1),
    "aten.prod.default": lambda m, x: (x * 0.1 + 1).prod(),
    "aten.logsumexp.default": lambda m, x: torch.logsumexp(x, 1),
    "aten.logsumexp.default[dims 0, 2]": lambda m, x: torch.logsumexp(x, (0, 2)),
    "aten.var.dim": lambda m, x: x.var(1),
    "aten.var.correction[correction 2, dims 0, 2]": lambda m, x: torch.var(x, (0, 2), correction=2),
    "aten.var.correction[all dims]": lambda m, x: x.var(),
    "aten.std.dim[unbiased False]": lambda m, x: torch.std(x, 1, unbiased=False),
    "aten.std.correction[keepdim]": lambda m, x: torch.std(x, -1, keepdim=True, correction=0.5),
    "aten.linalg_vector_norm.default": lambda m, x: x.norm(dim=1),
    "aten.linalg_vector_norm.default[all dims]": lambda m, x: torch.linalg.vector_norm(x),
    "aten.linalg_vector_norm.default[ord 1]": lambda m, x: x.norm(p=1, dim=2),
    "aten.linalg_vector_norm.default[ord inf]": lambda m, x: torch.linalg.vector_norm(x, float("inf"), dim=1),
    "aten.linalg_vector_norm.default[ord -inf]": lambda m, x: torch.linalg.vector_norm(x, float("-inf"), dim=2),
    "aten.linalg_vector_norm.default[ord 0]": lambda m, x: torch.linalg.vector_norm(F.relu(x), 0, dim=2),
    "aten.linalg_vector_norm.default[ord 3, dims 1, 2]": lambda m, x: torch.linalg.vector_norm(x, 3, dim=(1, 2)),
    "aten.linalg_vector_norm.default[ord 0.5]": lambda m, x: torch.linalg.vector_norm(x, 0.5, dim=-1),
}

SCANS = {
    "aten.cumsum.default": lambda m, x: x.cumsum(1),
    "aten.cumsum.default[dim 0]": lambda m, x: torch.cumsum(x, 0),
    "aten.cumprod.default": lambda m, x: (x * 0.2 + 1).cumprod(-1),
}

# one case per way of folding, run again under the loop and split strategies with several chunks per row
LOOPED = [
    "aten.sum.dim_IntList[dims 0, 2, keepdim]",
    "aten.mean.default",
    "aten.amin.default[dims 0, 1]",
    "aten.max.dim",
    "aten.argmin.default[keepdim]",
    "aten.prod.dim_int",
    "aten.logsumexp.default[dims 0, 2]",
    "aten.var.correction[correction 2, dims 0, 2]",
    "aten.std.dim[unbiased False]",
    "aten.linalg_vector_norm.default[ord 3, dims 1, 2]",
    "aten.cumsum.default",
    "aten.cumprod.default",
]


def compile_with(model, example_inputs, *, device, schedule=None, **changes):
    """Capture and compile `model`; `changes` replace parameters of every reduce/scan kernel of the
    default schedule (or of `schedule`). Returns (program, graph)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = capture_graph(model.eval().to(device), tuple(value.to(device) for value in example_inputs))
    params = [graph_input.target for graph_input in graph.inputs if graph_input.kind == "user_input"]
    program = compile_graph(graph, prefix="model", forward_params=params, has_self=True, schedule=schedule)
    if changes:
        steps = [
            KernelLine(step.template, step.nodes, tuple((name, changes.get(name, old)) for name, old in step.params))
            if isinstance(step, KernelLine) and step.template in ("reduce", "scan")
            else step
            for step in parse_schedule(program.schedule).steps
        ]
        script = print_schedule(Schedule(tuple(steps)))
        assert parse_schedule(script) == Schedule(tuple(steps))
        program = compile_graph(graph, prefix="model", forward_params=params, has_self=True, schedule=script)
    return program, graph


def run_program(program, model, test_inputs, load_program, device):
    model = model.eval().to(device)
    test_inputs = tuple(value.to(device) for value in test_inputs)
    forward = getattr(load_program(program), program.forward_function)
    with torch.no_grad():
        return forward(model, *test_inputs), model(*test_inputs)


def flattened(result) -> list[torch.Tensor]:
    """The tensors of a result in order (the hybrid returns max's values and indices as two outputs)."""
    if isinstance(result, torch.Tensor):
        return [result]
    return [tensor for item in result for tensor in flattened(item)]


def assert_same(actual, expected, tolerance=1e-4):
    actual, expected = flattened(actual), flattened(expected)
    assert len(actual) == len(expected)
    for got, want in zip(actual, expected):
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got, want, atol=tolerance, rtol=tolerance, equal_nan=True)


@pytest.mark.parametrize("case", list(REDUCTIONS) + list(SCANS))
def test_op_matches_pytorch_on_a_strided_input_of_new_sizes(case, run_hybrid):
    function = {**REDUCTIONS, **SCANS}[case]
    program, actual, expected = run_hybrid(Function(function), (torch.randn(CAPTURE_SHAPE),), (strided_input(),))
    assert program.schedule.startswith(f"kernel {'scan' if case in SCANS else 'reduce'} ")
    assert case.split("[")[0] in program.replaced_ops
    assert program.kept_ops == ()
    assert_same(actual, expected)


CHUNKED = [("loop", case) for case in LOOPED] + [("split", case) for case in LOOPED if case not in SCANS]


@pytest.mark.parametrize(("strategy", "case"), CHUNKED)
def test_chunked_strategies_over_several_chunks_match_pytorch(strategy, case, load_program, device):
    model = Function({**REDUCTIONS, **SCANS}[case])
    changes = {"strategy": strategy, "block": 16, "rows": 4} | ({"splits": 2} if strategy == "split" else {})
    program, _ = compile_with(model, (torch.randn(CAPTURE_SHAPE),), device=device, **changes)
    assert f"strategy={strategy} block=16" in program.schedule
    assert "for start in range(" in program.kernel_block
    # every reduced extent spans two or more chunks of 16
    actual, expected = run_program(program, model, (torch.randn(2, 17, 18).transpose(1, 2),), load_program, device)
    assert_same(actual, expected)


TRAILING = {
    "sum over the two trailing dims": lambda m, x: x.sum((1, 2)),
    "amax over the two trailing dims, keepdim": lambda m, x: x.amax((-2, -1), keepdim=True),
    "argmax of all": lambda m, x: x.argmax(),
    "var over the two trailing dims": lambda m, x: torch.var(x, (1, 2)),
}


@pytest.mark.parametrize("strategy", ["single", "loop", "split"])
@pytest.mark.parametrize("case", list(TRAILING))
def test_folding_several_trailing_dims_reads_a_contiguous_input_at_flat_offsets(case, strategy, load_program, device):
    model = Function(TRAILING[case])
    changes = {"strategy": strategy, "block": 16, "rows": 2} | ({"splits": 2} if strategy == "split" else {})
    program, _ = compile_with(model, (torch.randn(CAPTURE_SHAPE),), device=device, **changes)
    assert "X_IS_CONTIGUOUS:" in program.kernel_block and "rows[:, None] * reduced_size + columns" in program.kernel_block
    for test_input in (torch.randn(3, 7, 9), strided_input()):  # the flat offsets, then the strides
        actual, expected = run_program(program, model, (test_input,), load_program, device)
        assert_same(actual, expected)


def special_rows() -> torch.Tensor:
    """Eight rows of 40 (several 16-wide chunks) holding ties, NaN, infinities and a large offset."""
    x = torch.randn(8, 40)
    x[0, [5, 21, 37]] = 10.0  # the same maximum in one lane (5, 21, 37 are 16 apart) and another
    x[1, [30, 2]] = 10.0  # tied maxima in different lanes and chunks: the first index wins
    x[1, [33, 17]] = -10.0
    x[2] = float("-inf")
    x[3, :20] = float("-inf")  # the online logsumexp starts from rows of -inf only
    x[4, [25, 35]] = float("nan")
    x[5, 18] = float("inf")
    x[5, 3] = float("-inf")
    x[6] += 1000.0  # exp would overflow without the shift
    x[7, 39] = float("nan")
    return x


def special_value_reductions(m, x):
    return (
        x.amax(1),
        x.amin(1),
        x.max(1),
        x.min(1),
        x.argmax(1),
        x.argmin(1),
        torch.logsumexp(x, 1),
        x.sum(1),
        torch.linalg.vector_norm(x, float("inf"), dim=1),
    )


@pytest.mark.parametrize("strategy", ["single", "loop", "split"])
def test_nan_infinities_and_ties_behave_as_in_pytorch(strategy, load_program, device):
    model = Function(special_value_reductions)
    program, _ = compile_with(model, (torch.randn(4, 6),), device=device, strategy=strategy, block=16, rows=2, splits=2)
    assert program.kept_ops == ()
    actual, expected = run_program(program, model, (special_rows(),), load_program, device)
    assert_same(actual, expected)


def low_precision_reductions(m, x):
    return (
        x.sum(1),
        x.mean(-1, keepdim=True),
        x.var(1),
        x.std(),
        x.amax((0, 2)),
        x.argmax(2),
        torch.logsumexp(x, 1),
        x.norm(dim=2),
        x.cumsum(2),
    )


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_low_precision_inputs_accumulate_in_float32_and_round_once(dtype, run_hybrid):
    model = Function(low_precision_reductions)
    test_input = strided_input(dtype)
    program, actual, _ = run_hybrid(model, (torch.randn(CAPTURE_SHAPE, dtype=dtype),), (test_input,))
    assert program.kept_ops == ()
    # the reference computes in float32 and rounds at the end; PyTorch's own CUDA cumsum adds
    # bfloat16 in bfloat16, which drifts further from the exact result than this tolerance
    with torch.no_grad():
        reference = [
            value if value.dtype == torch.int64 else value.to(dtype)
            for value in flattened(model(test_input.to(actual[0].device).float()))
        ]
    assert_same(actual, reference, tolerance=1e-2)


def test_prologue_ops_are_computed_in_the_reduce_kernel(run_hybrid):
    model = Function(lambda m, x: F.relu(x * m.scale + m.shift).sum(-1), scale=torch.randn(7), shift=torch.randn(7))
    program, actual, expected = run_hybrid(model, (torch.randn(4, 6, 7),), (strided_input(),))
    assert len(program.kernels) == 1
    assert program.replaced_ops == ("aten.mul.Tensor", "aten.add.Tensor", "aten.relu.default", "aten.sum.dim_IntList")
    assert_same(actual, expected)


def test_a_low_precision_prologue_is_rounded_before_the_reduction(run_hybrid):
    # float16 holds only even numbers near 2048: PyTorch sums x + 2048 rounded to them, exactly in float32
    model = Function(lambda m, x: (x + 2048).sum(1, dtype=torch.float32) - 2048 * 13)
    example, test_input = torch.randn(4, 13, dtype=torch.float16), torch.randn(7, 13, dtype=torch.float16) * 4
    program, actual, expected = run_hybrid(model, (example,), (test_input,))
    assert len(program.kernels) == 1
    torch.testing.assert_close(actual, expected, atol=0, rtol=0)


def test_an_epilogue_reads_the_low_precision_result_pytorch_stores(run_hybrid):
    # the float16 sum is near 2048, where float16 holds only even numbers, before 2048 is subtracted
    model = Function(lambda m, x: x.sum(1) - 2048)
    example, test_input = torch.randn(4, 13, dtype=torch.float16), torch.randn(7, 13, dtype=torch.float16) + 157.5
    program, actual, expected = run_hybrid(model, (example,), (test_input,))
    assert len(program.kernels) == 1
    torch.testing.assert_close(actual, expected, atol=0, rtol=0)


def test_epilogue_ops_run_on_the_reduced_rows(run_hybrid):
    def reduce_then_scale(m, x):
        total = x.sum(1)
        return torch.tanh(total * 2) + m.bias, total

    model = Function(reduce_then_scale, bias=torch.randn(7))
    program, actual, expected = run_hybrid(model, (torch.randn(4, 6, 7),), (strided_input(),))
    assert len(program.kernels) == 1
    # the sum is returned too, so the kernel stores it beside the epilogue's result
    assert "    sum_1, add = model_fused_sum_mul_tanh_add(x, drtriton_module_tensors['bias'])\n" in program.kernel_block
    assert_same(actual, expected)


def test_an_index_result_feeds_a_float_epilogue(run_hybrid):
    model = Function(lambda m, x: x.argmax(1).float() * 0.5 + 1)
    program, actual, expected = run_hybrid(model, (torch.randn(CAPTURE_SHAPE),), (strided_input(),))
    assert len(program.kernels) == 1 and program.kept_ops == ()
    assert_same(actual, expected)


def test_values_and_indices_come_from_one_kernel_with_a_prologue(run_hybrid):
    model = Function(lambda m, x: (x * 2 - 1).max(1))
    program, actual, expected = run_hybrid(model, (torch.randn(CAPTURE_SHAPE),), (strided_input(),))
    assert len(program.kernels) == 1
    assert "aten.sub.Tensor" in program.replaced_ops and "aten.max.dim" in program.replaced_ops
    assert_same(actual, expected)


def test_a_new_batch_size_is_read_at_run_time(load_program, device):
    model = Function(lambda m, x: (x * m.weight).sum(-1), weight=torch.randn(13))
    program, graph = compile_with(model, (torch.randn(4, 13),), device=device)
    batch, features = graph.inputs[-1].spec.shape
    assert isinstance(batch, str) and features == 13
    actual, expected = run_program(program, model, (torch.randn(7, 13),), load_program, device)
    assert_same(actual, expected)


def epilogue_model() -> Function:
    return Function(lambda m, x: torch.sigmoid(torch.logsumexp(x * 0.5, 1) - m.bias), bias=torch.randn(17))


@pytest.mark.parametrize(
    "changes",
    [
        {"strategy": "loop", "block": 16, "rows": 4, "warps": 2},
        {"strategy": "single", "block": 1024, "rows": 8, "warps": 1},
    ],
    ids=["loop", "single, 8 rows"],
)
def test_other_schedules_give_other_kernels_with_the_same_results(changes, load_program, device):
    model = epilogue_model()
    default, _ = compile_with(model, (torch.randn(4, 6, 17),), device=device)
    program, _ = compile_with(model, (torch.randn(4, 6, 17),), device=device, **changes)
    assert program.kernel_block != default.kernel_block
    assert program.replaced_ops == default.replaced_ops and len(program.kernels) == 1
    test_input = torch.randn(3, 37, 17)
    actual, expected = run_program(program, model, (test_input,), load_program, device)
    assert_same(actual, expected)


def test_the_same_graph_and_script_give_the_same_source(device):
    first, _ = compile_with(epilogue_model(), (torch.randn(4, 6, 17),), device=device, strategy="loop")
    second, _ = compile_with(epilogue_model(), (torch.randn(4, 6, 17),), device=device, strategy="loop")
    assert first.kernel_block == second.kernel_block and first.schedule == second.schedule


def test_long_rows_sum_to_float32_accuracy(run_hybrid):
    model = Function(lambda m, x: (x.sum(1), x.var(1)))
    # an offset of 1000 would cancel catastrophically in a one-pass E[x^2] - E[x]^2 variance
    test_input = torch.rand(2, 30011) + 1000.0
    program, actual, expected = run_hybrid(model, (torch.rand(2, 5000) + 1000.0,), (test_input,))
    # two rows cannot fill a GPU: by default several programs share each row
    assert program.schedule.count("strategy=split") == 2
    exact = test_input.double()
    torch.testing.assert_close(actual[0].cpu(), exact.sum(1).float(), rtol=1e-5, atol=0)
    torch.testing.assert_close(actual[1].cpu(), exact.var(1).float(), rtol=1e-4, atol=0)
    assert_same(actual, expected)


UNSUPPORTED = {
    "a narrowing dtype argument": (lambda m, x: x.sum(1, dtype=torch.float16), "aten.sum.dim_IntList"),
    "an integer input": (lambda m, x: (x * 10).long().sum(1), "aten.sum.dim_IntList"),
    "a float64 input": (lambda m, x: x.double().cumsum(1), "aten.cumsum.default"),
}


@pytest.mark.parametrize("case", list(UNSUPPORTED))
def test_unsupported_arguments_stay_in_pytorch(case, run_hybrid):
    function, op = UNSUPPORTED[case]
    program, actual, expected = run_hybrid(Function(function), (torch.randn(4, 6),), (torch.randn(7, 13),))
    assert op in program.kept_ops and op not in program.replaced_ops
    assert_same(actual, expected)


def test_an_epilogue_cannot_read_a_value_computed_per_element_in_the_prologue(device):
    def same_shape_in_and_out(m, x):
        doubled = x * 2
        return doubled.sum(1, keepdim=True) + doubled

    model = Function(same_shape_in_and_out)
    default, _ = compile_with(model, (torch.randn(4, 1),), device=device)
    assert default.schedule.startswith("kernel pointwise mul ")
    script = "kernel reduce mul,sum_1,add strategy=single block=16 splits=1 rows=1 warps=1\n"
    with pytest.raises(ScheduleError, match="prologue computes per element"):
        compile_with(model, (torch.randn(4, 1),), device=device, schedule=script)
