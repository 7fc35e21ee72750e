"""The normalize template: softmax, log_softmax and the norms against PyTorch, under both strategies.

Each model is captured at one size and run at another (a new batch, odd sizes), on the GPU or under
Triton's interpreter; the loop strategy is forced with chunks shorter than the rows, so it really loops.
"""

from __future__ import annotations

import re
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.graph import GraphInput, OpGraph, OpNode, TensorSpec
from drtriton_lsp.compiler.planner import default_schedule
from drtriton_lsp.compiler.script import print_schedule
from drtriton_lsp.compiler.templates import TEMPLATES
from drtriton_lsp.compiler.templates.normalize import strategy_parameter
from drtriton_lsp.worker.capture import capture_graph

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter computes masked-off lanes too

NORMALIZE = TEMPLATES["normalize"]


class Lambda(nn.Module):
    """A forward given as a function of the inputs (and of the module, for its submodule `inner`)."""

    def __init__(self, function, inner: nn.Module | None = None):
        super().__init__()
        self.function = function
        self.inner = inner

    def forward(self, x):
        return self.function(self, x)


class TwoInputs(Lambda):
    def forward(self, x, y):
        return self.function(self, x, y)


def with_inner(module: nn.Module, function=None) -> Lambda:
    """`module` applied to the input (then `function`, if given), with random parameters and running stats."""
    with torch.no_grad():
        for name, tensor in list(module.named_parameters()) + list(module.named_buffers()):
            if name == "running_var":
                tensor.uniform_(0.5, 2.0)
            elif tensor.is_floating_point():
                tensor.uniform_(-1.0, 1.0)
    return Lambda(lambda self, x: (function or (lambda y: y))(self.inner(x)), module)


def capture(model: nn.Module, inputs: tuple) -> OpGraph:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return capture_graph(model.eval(), inputs)


def with_parameters(script: str, **changes) -> str:
    """The script with the given parameters of its normalize kernels changed."""
    changed = []
    for line in script.splitlines(keepends=True):
        if line.startswith("kernel normalize "):
            for name, value in changes.items():
                line = re.sub(rf"\b{name}=\S+", f"{name}={value}", line)
        changed.append(line)
    return "".join(changed)


@pytest.fixture
def check(load_program, device):
    """Capture `model` at `example`, then for each script variant compile, run at `test`, compare."""

    def run(model, example, test, *, variants=({},), tolerance=1e-4, equal_nan=False, normalize_kernels=1):
        model = model.eval().to(device)
        example = tuple(value.to(device) for value in example)
        test = tuple(value.to(device) for value in test)
        graph = capture(model, example)
        default = print_schedule(default_schedule(graph))
        assert default.count("kernel normalize ") == normalize_kernels, default
        params = [graph_input.target for graph_input in graph.inputs if graph_input.kind == "user_input"]
        with torch.no_grad():
            expected = model(*test)
        programs = []
        for changes in variants:
            script = with_parameters(default, **changes)
            assert changes == {} or script != default, f"{changes} changes nothing in {default}"
            program = compile_graph(graph, prefix="model", forward_params=params, has_self=True, schedule=script)
            assert program.schedule == script
            with torch.no_grad():
                actual = getattr(load_program(program), program.forward_function)(model, *test)
            torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance, equal_nan=equal_nan)
            programs.append(program)
        return programs

    return run


LOOP = {"strategy": "loop16"}
SEVERAL_ROWS = {"rows": 4, "warps": 2}


def normal(*shape, dtype=torch.float32):
    return torch.randn(shape, dtype=dtype)


FAMILY_CASES = {
    "softmax over the last dim": (Lambda(lambda self, x: F.softmax(x, -1)), (2, 5, 13), (3, 7, 37)),
    "softmax over dim 1 of 4": (Lambda(lambda self, x: F.softmax(x, 1)), (2, 5, 4, 3), (3, 19, 2, 3)),
    "log_softmax over dim 0": (Lambda(lambda self, x: F.log_softmax(x, 0)), (4, 6), (37, 9)),
    "_softmax": (Lambda(lambda self, x: torch.ops.aten._softmax(x, 1, False)), (3, 5, 4), (3, 21, 4)),
    "_log_softmax": (Lambda(lambda self, x: torch.ops.aten._log_softmax(x, -1, False)), (3, 5), (7, 33)),
    "layer_norm over two dims": (with_inner(nn.LayerNorm([5, 7])), (2, 5, 7), (9, 5, 7)),
    "layer_norm without affine": (with_inner(nn.LayerNorm(29, elementwise_affine=False)), (2, 3, 29), (3, 7, 29)),
    "layer_norm without bias": (with_inner(nn.LayerNorm(29, bias=False)), (2, 29), (13, 29)),
    "rms_norm": (with_inner(nn.RMSNorm(29)), (2, 3, 29), (3, 7, 29)),
    "rms_norm with eps, no weight": (with_inner(nn.RMSNorm([3, 11], 1e-3, False)), (2, 3, 11), (5, 3, 11)),
    "group_norm": (with_inner(nn.GroupNorm(3, 6)), (2, 6, 4, 5), (3, 6, 7, 3)),
    "group_norm, one group": (with_inner(nn.GroupNorm(1, 4)), (2, 4, 3), (5, 4, 7)),
    "group_norm of a matrix": (with_inner(nn.GroupNorm(2, 6)), (3, 6), (5, 6)),
    "instance_norm": (with_inner(nn.InstanceNorm2d(4)), (2, 4, 5, 6), (3, 4, 7, 3)),
    "instance_norm, affine": (with_inner(nn.InstanceNorm1d(4, affine=True)), (2, 4, 5), (3, 4, 19)),
    "instance_norm, running stats": (
        with_inner(nn.InstanceNorm2d(4, affine=True, track_running_stats=True)), (2, 4, 5, 6), (3, 4, 7, 5),
    ),
    "batch_norm": (with_inner(nn.BatchNorm2d(4)), (2, 4, 5, 6), (3, 4, 7, 5)),
    "batch_norm of a matrix": (with_inner(nn.BatchNorm1d(5)), (2, 5), (9, 5)),
    "batch_norm 3d, no affine": (with_inner(nn.BatchNorm3d(3, affine=False)), (2, 3, 2, 3, 4), (1, 3, 3, 2, 5)),
}  # fmt: skip
OPS_OF_CASES = {
    "softmax": "aten.softmax.int", "log_softmax": "aten.log_softmax.int", "_softmax": "aten._softmax.default",
    "_log_softmax": "aten._log_softmax.default", "layer_norm": "aten.layer_norm.default",
    "rms_norm": "aten.rms_norm.default", "group_norm": "aten.group_norm.default",
    "instance_norm": "aten.instance_norm.default", "batch_norm": "aten.batch_norm.default",
}  # fmt: skip


# these also run with several rows per program, in both strategies
SEVERAL_ROWS_CASES = ("softmax over dim 1 of 4", "rms_norm", "group_norm", "batch_norm of a matrix")


@pytest.mark.parametrize("case", list(FAMILY_CASES), ids=list(FAMILY_CASES))
def test_op_matches_pytorch_at_a_new_size_under_both_strategies(case, check):
    model, example_shape, test_shape = FAMILY_CASES[case]
    variants = ({}, LOOP) + ((SEVERAL_ROWS, {**LOOP, **SEVERAL_ROWS}) if case in SEVERAL_ROWS_CASES else ())
    programs = check(model, (normal(*example_shape),), (normal(*test_shape),), variants=variants)
    op = OPS_OF_CASES[case.split(" ")[0].rstrip(",")]
    for program in programs:
        assert program.replaced_ops == (op,) and program.kept_ops == ()


NON_CONTIGUOUS_CASES = {
    "layer_norm of a transpose": (with_inner(nn.LayerNorm(13)), lambda: normal(3, 13, 7).transpose(1, 2)),
    "softmax over dim 1 of a permute": (
        Lambda(lambda self, x: F.softmax(x, 1)), lambda: normal(2, 5, 3, 9).permute(0, 3, 1, 2),
    ),
    "group_norm of channels-last": (
        with_inner(nn.GroupNorm(2, 4)), lambda: normal(2, 4, 5, 3).to(memory_format=torch.channels_last),
    ),
    "batch_norm of a column slice": (with_inner(nn.BatchNorm1d(5)), lambda: normal(9, 11)[:, 3:8]),
}  # fmt: skip


@pytest.mark.parametrize("case", list(NON_CONTIGUOUS_CASES), ids=list(NON_CONTIGUOUS_CASES))
def test_non_contiguous_input_is_read_through_its_strides(case, check):
    model, make_input = NON_CONTIGUOUS_CASES[case]
    test_input = make_input()
    assert not test_input.is_contiguous()
    check(model, (normal(*test_input.shape).contiguous(),), (test_input,), variants=({}, LOOP))


LOW_PRECISION_CASES = {
    "layer_norm then silu and a residual": lambda: with_inner(nn.LayerNorm(29), lambda y: F.silu(y) + y),
    "rms_norm": lambda: with_inner(nn.RMSNorm(29)),
    "group_norm": lambda: with_inner(nn.GroupNorm(2, 4)),
    "softmax": lambda: Lambda(lambda self, x: F.softmax(x, -1) * 3),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("case", list(LOW_PRECISION_CASES), ids=list(LOW_PRECISION_CASES))
def test_low_precision_computes_in_float32_and_rounds_like_pytorch(case, dtype, check):
    model = LOW_PRECISION_CASES[case]().to(dtype)
    shape, test_shape = ((2, 4, 29), (3, 4, 29)) if case != "group_norm" else ((2, 4, 3, 5), (3, 4, 7, 5))
    # 1.6e-2 for bfloat16: Triton's interpreter rounds float32 -> bfloat16 toward zero (GPUs round to nearest),
    # so a chain of two rounded ops can land 2 bfloat16 steps (up to 1.6%) from PyTorch
    tolerance = {torch.float16: 1e-2, torch.bfloat16: 1.6e-2}[dtype]
    # the loop strategy recomputes the prologue and the rounding between ops in its second pass
    variants = ({}, LOOP) if case == "layer_norm then silu and a residual" else ({},)
    example, test = (normal(*shape, dtype=dtype),), (normal(*test_shape, dtype=dtype),)
    check(model, example, test, variants=variants, tolerance=tolerance)


def test_softmax_dtype_argument_widens_exactly(check):
    model = Lambda(lambda self, x: F.softmax(x, -1, dtype=torch.float32))
    half = torch.float16
    check(model, (normal(2, 21, dtype=half),), (normal(5, 37, dtype=half),), variants=({}, LOOP))


def test_softmax_dtype_argument_rounds_the_input_first(check):
    model = Lambda(lambda self, x: F.log_softmax(x * 3, 0, dtype=torch.bfloat16))
    # the input and the result are each rounded to bfloat16 (toward zero under the interpreter)
    check(model, (normal(2, 21),), (normal(37, 5),), variants=({}, LOOP), tolerance=1.6e-2)


def test_rms_norm_without_eps_adds_the_float32_epsilon_even_for_float16(check):
    # mean square 1e-6: float32's epsilon (1.2e-7) shifts the result by about 6%, float16's (1e-3) by 30x
    model = with_inner(nn.RMSNorm(16)).to(torch.float16)
    tiny = (normal(3, 16) * 1e-3).to(torch.float16)
    check(model, (normal(2, 16, dtype=torch.float16),), (tiny,), tolerance=1e-2)


def test_epilogue_runs_in_the_same_kernel(check):
    model = with_inner(nn.LayerNorm(29), lambda y: F.gelu(y) * 2)
    (program,) = check(model, (normal(2, 3, 29),), (normal(5, 7, 29),))
    assert program.replaced_ops == ("aten.layer_norm.default", "aten.gelu.default", "aten.mul.Tensor")
    assert len(program.kernels) == 1


def test_prologue_and_epilogue_around_a_softmax(check):
    model = TwoInputs(lambda self, scores, bias: torch.tanh(F.softmax(scores * 0.125 + bias, -1)) * 2)
    example = (normal(2, 3, 11), normal(11))
    programs = check(model, example, (normal(4, 5, 19), normal(19)), variants=({}, LOOP))
    assert all(len(program.kernels) == 1 and program.kept_ops == () for program in programs)
    assert "kernel normalize mul,add,softmax,tanh,mul_1 " in programs[0].schedule


def test_a_prologue_value_the_epilogue_also_reads_stays_in_registers(load_program, device):
    def scaled_softmax(self, x, y):
        z = x + y
        return F.softmax(z, -1) * z

    model = TwoInputs(scaled_softmax)
    graph = capture(model, (normal(2, 9), normal(2, 9)))
    # the default schedule stores z (two ops read it); this script computes it once, in the kernel
    script = "kernel normalize add,softmax,mul strategy=loop16 rows=2 warps=2\n"
    program = compile_graph(graph, prefix="model", forward_params=["x", "y"], has_self=True, schedule=script)
    inputs = (normal(5, 37).to(device), normal(5, 37).to(device))
    actual = getattr(load_program(program), program.forward_function)(model, *inputs)
    torch.testing.assert_close(actual, scaled_softmax(None, *inputs))


def test_nan_and_infinities_propagate_as_in_pytorch(check):
    special = normal(5, 40)
    special[0, 3] = float("nan")
    special[1, :] = float("-inf")  # PyTorch: NaN for the whole row
    special[2, 20] = float("inf")
    special[3, :35] = float("-inf")  # the first loop chunks see only -inf
    model = Lambda(lambda self, x: (F.softmax(x, -1), F.log_softmax(x, -1), F.layer_norm(x, (40,))))
    check(model, (normal(2, 40),), (special,), variants=({}, LOOP), normalize_kernels=3, equal_nan=True)


def test_looped_variance_is_as_accurate_as_pytorch_when_the_mean_dwarfs_the_spread(check):
    model = with_inner(nn.LayerNorm(300, elementwise_affine=False))
    shifted = normal(4, 300) + 3000.0
    reference = F.layer_norm(shifted.double(), (300,))
    eager_error = (model(shifted).double() - reference).abs().max().item()
    (program,) = check(model, (normal(2, 300),), (shifted,), variants=(LOOP,), tolerance=5 * eager_error)
    assert "strategy=loop16" in program.schedule


def test_an_empty_batch_launches_nothing_and_returns_an_empty_result(check):
    check(with_inner(nn.LayerNorm(13)), (normal(2, 13),), (normal(0, 13),), variants=({}, LOOP))


def test_ops_with_other_semantics_stay_in_pytorch(compile_model):
    class Kept(nn.Module):
        def forward(self, x):
            batch_statistics = F.batch_norm(x, None, None, training=True)
            return batch_statistics, F.softmax(x.double(), -1)

    program = compile_model(Kept(), (normal(4, 6),))
    assert "aten.batch_norm.default" in program.kept_ops and "aten.softmax.int" in program.kept_ops


def test_softmax_from_float16_to_float32_in_one_call_is_not_claimed():
    half_input = GraphInput("x", "user_input", "x", TensorSpec(("s0", 8), "float16"))
    node = OpNode("softmax", "aten._softmax.default", ({"ref": "x"}, 1, True), {}, (TensorSpec(("s0", 8), "float32"),))
    graph = OpGraph([half_input], [node], [{"ref": "softmax"}], False)
    assert NORMALIZE.anchor(node, graph) is None
    same_dtype = OpNode("softmax", "aten._softmax.default", ({"ref": "x"}, 1, False), {}, (half_input.spec,))
    assert NORMALIZE.anchor(same_dtype, graph) is not None


def test_the_same_graph_and_script_give_the_same_source():
    graph = capture(with_inner(nn.GroupNorm(2, 4), torch.relu), (normal(2, 4, 3, 5),))
    script = with_parameters(print_schedule(default_schedule(graph)), strategy="loop64", rows=2)
    sources = {
        compile_graph(graph, prefix="model", forward_params=["x"], has_self=True, schedule=script).kernel_block
        for _ in range(2)
    }
    assert len(sources) == 1


def test_defaults_loop_over_long_rows_and_pack_short_rows():
    softmax = Lambda(lambda self, x: F.softmax(x, -1))
    long_rows = print_schedule(default_schedule(capture(softmax, (normal(4, 40000),))))
    short_rows = print_schedule(default_schedule(capture(softmax, (normal(20000, 32),))))
    assert "strategy=loop4096 rows=1 warps=16" in long_rows
    assert int(re.search(r"strategy=single rows=(\d+) ", short_rows).group(1)) > 1


def test_strategy_parameter_reads_back_only_its_canonical_spelling():
    strategy = strategy_parameter()
    for value in strategy.values:
        assert strategy.render(strategy.parse(strategy.render(value))) == value
    assert strategy.values[:2] == ("single", "loop16") and strategy.values[-1] == "loop16384"
    for wrong in ("loop", "loop15", "loop016", "loop32768", "Single", "loops", "loop 16"):
        with pytest.raises(ValueError):
            strategy.parse(wrong)
