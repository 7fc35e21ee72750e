"""The conv template: conv1d and conv2d as implicit-GEMM Triton kernels with fused epilogues, chosen by script or search.

Convolutions stay in PyTorch by default; here each module is compiled with the search's "conv" alternative
(the convolution and the pointwise kernel after it in one kernel), captured at one size and run at odd others.
"""

from __future__ import annotations

import dataclasses

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from drtriton_lsp.compiler.errors import ScheduleError
from drtriton_lsp.compiler.fragments import fragment_graph, search_steps, step_alternatives
from drtriton_lsp.compiler.planner import default_schedule
from drtriton_lsp.compiler.script import KernelLine, Schedule, parse_schedule, print_schedule
from drtriton_lsp.compiler.templates import TEMPLATES
from drtriton_lsp.compiler.templates.base import KernelPlan
from drtriton_lsp.engine.search import SearchBudget, search_schedule, tf32_allowed
from schedule_helpers import capture, compile_with, schedule_choosing

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter computes masked-off lanes too

FLOAT32 = {"atol": 1e-4, "rtol": 1e-4}
TF32 = {"atol": 1e-2, "rtol": 1e-2}
TOLERANCES = {
    torch.float16: {"atol": 1e-2, "rtol": 1e-2},
    # Triton's interpreter truncates float32 -> bfloat16 rather than rounding to nearest
    torch.bfloat16: {"atol": 1.6e-2, "rtol": 1.6e-2},
}


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def conv_schedule(graph) -> str:
    """The default schedule with the search's "conv" alternative chosen for every kept convolution."""
    return schedule_choosing(graph, "conv")


@pytest.fixture
def run_conv(load_program, device):
    """Compile `model` at the example inputs with its convolutions in conv kernels, run it at `test_inputs`."""

    def run(model: nn.Module, example_inputs: tuple, test_inputs: tuple):
        model = model.eval().to(device)
        graph = capture(model, tuple(value.to(device) for value in example_inputs))
        program = compile_with(graph, conv_schedule(graph))
        module = load_program(program)
        test_inputs = tuple(value.to(device) for value in test_inputs)
        with torch.no_grad():
            expected = model(*test_inputs)
            actual = getattr(module, program.forward_function)(model, *test_inputs)
        return program, actual, expected

    return run


class Convolution(nn.Module):
    """A module around a function of the forward's input and one convolution weight and bias."""

    def __init__(self, function, weight_shape, bias=True, dtype=torch.float32):
        super().__init__()
        self.function = function
        self.weight = nn.Parameter(randn(*weight_shape, dtype=dtype))
        self.bias = nn.Parameter(randn(weight_shape[0], dtype=dtype)) if bias else None

    def forward(self, x):
        return self.function(self, x)


# name: (module, capture input, test input at odd sizes)
FAMILY_CASES = {
    "conv2d[stride 2, padding 1]": (nn.Conv2d(3, 5, 3, stride=2, padding=1), randn(2, 3, 9, 9), randn(3, 3, 11, 13)),
    "conv2d[per-dim stride, padding, dilation]": (
        nn.Conv2d(4, 6, (3, 2), stride=(1, 2), padding=(1, 2), dilation=(2, 1)),
        randn(2, 4, 8, 8),
        randn(1, 4, 9, 7),
    ),
    "conv2d[1x1, no bias]": (nn.Conv2d(5, 7, 1, bias=False), randn(2, 5, 4, 4), randn(3, 5, 5, 3)),
    "conv2d[padding same, even window, dilation]": (
        nn.Conv2d(3, 4, (4, 3), padding="same", dilation=(1, 2)),
        randn(2, 3, 8, 8),
        randn(2, 3, 7, 9),
    ),
    "conv2d[padding valid]": (nn.Conv2d(3, 4, 3, padding="valid"), randn(2, 3, 8, 8), randn(2, 3, 7, 9)),
    "conv1d[stride, padding, dilation]": (
        nn.Conv1d(3, 5, 3, stride=2, padding=2, dilation=2),
        randn(2, 3, 12),
        randn(3, 3, 17),
    ),
    "conv1d[padding same, even window]": (nn.Conv1d(3, 4, 4, padding="same"), randn(2, 3, 12), randn(3, 3, 17)),
    "convolution[2d]": (
        Convolution(
            lambda m, x: torch.ops.aten.convolution.default(x, m.weight, m.bias, [2, 1], [0, 1], [1, 1], False, [0, 0], 1),
            (5, 3, 3, 3),
        ),
        randn(2, 3, 8, 8),
        randn(3, 3, 9, 11),
    ),
    "convolution[1d, no bias]": (
        Convolution(
            lambda m, x: torch.ops.aten.convolution.default(x, m.weight, None, [1], [1], [2], False, [0], 1),
            (4, 3, 3),
            bias=False,
        ),
        randn(2, 3, 8),
        randn(3, 3, 11),
    ),
}


@pytest.mark.parametrize("case", list(FAMILY_CASES), ids=list(FAMILY_CASES))
def test_convolution_matches_pytorch_at_odd_sizes(case, run_conv):
    model, capture_input, test_input = FAMILY_CASES[case]
    program, actual, expected = run_conv(model, (capture_input,), (test_input,))
    assert program.kept_ops == () and len(program.kernels) == 1, program.schedule
    assert program.schedule.startswith("kernel conv ")
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, **FLOAT32)


@pytest.mark.parametrize(
    "test_input",
    [randn(2, 9, 11, 3).permute(0, 3, 1, 2), randn(2, 3, 11, 9).transpose(2, 3)],
    ids=["channels last", "transposed spatial dims"],
)
def test_a_non_contiguous_input_is_read_through_its_strides(test_input, run_conv):
    assert not test_input.is_contiguous()
    program, actual, expected = run_conv(nn.Conv2d(3, 5, 3, padding=1), (randn(2, 3, 8, 8),), (test_input,))
    assert program.kept_ops == () and len(program.kernels) == 1
    torch.testing.assert_close(actual, expected, **FLOAT32)


class ConvBlock(nn.Module):
    """The pattern the epilogue is for: convolution, activation, scale, residual add."""

    def __init__(self, channels: int = 4, dtype=torch.float32):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 3, padding=1).to(dtype)
        self.scale = nn.Parameter(randn(channels, 1, 1, dtype=dtype))

    def forward(self, x):
        return F.relu(self.conv(x)) * self.scale + x


def test_the_epilogue_runs_on_each_output_tile_in_one_kernel(run_conv):
    program, actual, expected = run_conv(ConvBlock(), (randn(2, 4, 6, 6),), (randn(3, 4, 7, 5),))
    assert program.kernels == ("model_fused_conv2d_relu_mul_add_kernel",)
    assert program.replaced_ops == ("aten.conv2d.default", "aten.relu.default", "aten.mul.Tensor", "aten.add.Tensor")
    torch.testing.assert_close(actual, expected, **FLOAT32)


def test_the_convolution_and_its_epilogue_are_both_stored_when_both_are_read(run_conv):
    class ConvAndGate(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 5, 3)

        def forward(self, x):
            features = self.conv(x)
            return features, torch.sigmoid(features * 2)

    program, actual, expected = run_conv(ConvAndGate(), (randn(2, 3, 6, 6),), (randn(3, 3, 7, 9),))
    assert len(program.kernels) == 1
    assert (
        "    conv2d, sigmoid = model_fused_conv2d_mul_sigmoid(x, drtriton_module_tensors['conv.weight'], "
        "drtriton_module_tensors['conv.bias'])\n"
    ) in program.kernel_block
    for got, want in zip(actual, expected):
        torch.testing.assert_close(got, want, **FLOAT32)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_with_epilogue(dtype, run_conv):
    program, actual, expected = run_conv(
        ConvBlock(channels=5, dtype=dtype), (randn(2, 5, 6, 6, dtype=dtype),), (randn(3, 5, 7, 5, dtype=dtype),)
    )
    assert not program.kept_ops and actual.dtype == dtype
    torch.testing.assert_close(actual, expected, **TOLERANCES[dtype])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_conv1d(dtype, run_conv):
    model = nn.Conv1d(3, 5, 3, stride=2).to(dtype)
    program, actual, expected = run_conv(model, (randn(2, 3, 12, dtype=dtype),), (randn(3, 3, 17, dtype=dtype),))
    assert not program.kept_ops and actual.dtype == dtype
    torch.testing.assert_close(actual, expected, **TOLERANCES[dtype])


def test_the_default_schedule_keeps_convolutions_and_fuses_what_follows(compile_model):
    program = compile_model(ConvBlock(), (randn(2, 4, 6, 6),))
    assert program.schedule.splitlines() == ["keep conv2d", "kernel pointwise relu,mul,add block=1024 warps=4"]
    assert program.kept_ops == ("aten.conv2d.default",)


def with_parameters(schedule: str, **changes) -> str:
    """The script with the conv kernel's parameters changed (parsed values, e.g. tile=(32, 32, 16))."""
    parsed = parse_schedule(schedule)
    steps = tuple(
        dataclasses.replace(step, params=tuple((name, changes.get(name, value)) for name, value in step.params))
        if isinstance(step, KernelLine) and step.template == "conv"
        else step
        for step in parsed.steps
    )
    return print_schedule(dataclasses.replace(parsed, steps=steps))


SCHEDULE_CASES = {
    # 20 input channels in slices of 16: two channel blocks per window position, the second one partly masked
    "small tiles, two channel blocks": {"tile": (16, 16, 16), "warps": 2, "stages": 1},
    "wide tiles, tf32": {"tile": (32, 64, 32), "warps": 8, "stages": 4, "precision": "tf32"},
}


@pytest.mark.parametrize("case", list(SCHEDULE_CASES), ids=list(SCHEDULE_CASES))
def test_schedule_parameters_change_the_kernel_not_the_result(case, load_program, device):
    model = ConvBlock(channels=20).to(device).eval()
    graph = capture(model, (randn(2, 20, 6, 6).to(device),))
    default = compile_with(graph, conv_schedule(graph))
    changes = SCHEDULE_CASES[case]
    script = with_parameters(default.schedule, **changes)
    assert print_schedule(parse_schedule(script)) == script
    program = compile_with(graph, script)
    assert program.schedule == script and program.kernel_block != default.kernel_block
    assert program.kernel_block == compile_with(graph, script).kernel_block  # same script, same source
    assert program.tf32 == (changes.get("precision") == "tf32")
    block_m, block_n, block_k = changes["tile"]
    for launch_argument in (f"BLOCK_M={block_m},", f"BLOCK_N={block_n},", f"BLOCK_K={block_k},"):
        assert launch_argument in program.kernel_block
    x = randn(3, 20, 7, 5).to(device)
    with torch.no_grad():
        expected = model(x)
        results = [
            getattr(load_program(compiled), compiled.forward_function)(model, x) for compiled in (default, program)
        ]
    torch.testing.assert_close(results[0], expected, **FLOAT32)
    # tf32 rounds the operands to 10 mantissa bits on the GPU; the interpreter multiplies exactly
    torch.testing.assert_close(results[1], expected, **(TF32 if program.tf32 else FLOAT32))


def test_a_conv_line_round_trips_and_decodes_to_the_same_source():
    graph = capture(ConvBlock(), (randn(2, 4, 6, 6),))
    script = conv_schedule(graph)
    assert script == "kernel conv conv2d,relu,mul,add tile=64x16x16 warps=4 stages=2 precision=ieee\n"
    assert print_schedule(parse_schedule(script)) == script
    program = compile_with(graph, script)
    assert program.schedule == script and program.kernel_block == compile_with(graph, script).kernel_block
    assert 'input_precision="ieee"' in program.kernel_block and not program.tf32


UNSUPPORTED_CASES = {
    "groups": (nn.Conv2d(4, 4, 3, groups=2), randn(2, 4, 6, 6), "groups=2; of the grouped convolutions only depthwise"),
    "conv3d": (nn.Conv3d(3, 4, 3), randn(2, 3, 5, 5, 5), "non-transposed 1-d and 2-d convolutions"),
    "transposed": (nn.ConvTranspose2d(3, 4, 3), randn(2, 3, 5, 5), "non-transposed 1-d and 2-d convolutions"),
    "unbatched": (nn.Conv2d(3, 4, 3), randn(3, 6, 6), "an input of rank 3"),
    "float64": (nn.Conv2d(3, 4, 3).double(), randn(2, 3, 6, 6).double(), "one dtype"),
}


@pytest.mark.parametrize("case", list(UNSUPPORTED_CASES), ids=list(UNSUPPORTED_CASES))
def test_a_conv_line_for_a_convolution_the_template_does_not_compute_says_why(case):
    model, example_input, reason = UNSUPPORTED_CASES[case]
    graph = capture(model, (example_input,))
    (convolution,) = graph.nodes
    assert default_schedule(graph).steps == parse_schedule(f"keep {convolution.name}\n").steps
    assert search_steps(graph, default_schedule(graph)) == []  # nothing to search: no template computes it
    script = f"kernel conv {convolution.name} tile=64x16x16 warps=4 stages=2 precision=ieee\n"
    with pytest.raises(ScheduleError) as raised:
        compile_with(graph, script)
    message = raised.value.message
    assert message.startswith(f"line 1: kernel conv: {convolution.name} ({convolution.op}) cannot be computed by this template: ")
    assert reason in message


def test_the_search_offers_the_conv_kernel_with_its_epilogue_against_keeping_the_conv():
    graph = capture(ConvBlock(), (randn(2, 4, 6, 6),))
    base = default_schedule(graph)
    (step,) = search_steps(graph, base)
    assert step.positions == (0, 1) and step.nodes == ("conv2d", "relu", "mul", "add")
    alternatives = step_alternatives(graph, step)
    labels = [label for label, _ in alternatives]
    assert labels[:3] == ["default", "conv", "pytorch"]
    assert "conv tile=32x16x16" in labels and "block=2048" in labels
    fragment = fragment_graph(graph, step.nodes)
    for _, lines in alternatives:
        compile_with(fragment, print_schedule(Schedule(lines)))

    def conv_is_fastest(task, fragment, candidates, stop):
        return 1.0, [(True, "", 0.5 if "implicit GEMM" in source else 2.0) for source in candidates]

    result = search_schedule(graph, base, name="t", measure=conv_is_fastest, budget=SearchBudget())
    layouts, conv_step = result.fragments  # the whole graph in both layouts first (equally fast: the default kept)
    assert layouts.chosen == "default" and conv_step.chosen == "conv"
    assert result.schedule == dict(alternatives)["conv"][0].render() + "\n"
    assert compile_with(graph, result.schedule).replaced_ops[0] == "aten.conv2d.default"


def test_a_conv_read_before_the_pointwise_kernel_after_it_is_searched_alone():
    class ReadInBetween(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 4, 3)

        def forward(self, x):
            y = self.conv(x)
            return torch.relu(y) + y.flip(0)

    graph = capture(ReadInBetween(), (randn(2, 3, 6, 6),))
    base = default_schedule(graph)
    assert print_schedule(base) == "keep conv2d\nkeep flip\nkernel pointwise relu,add block=1024 warps=4\n"
    steps = search_steps(graph, base)
    assert [(step.positions, step.nodes) for step in steps] == [((0,), ("conv2d",)), ((2,), ("relu", "add"))]
    labels = [label for label, _ in step_alternatives(graph, steps[0])]
    assert labels[:2] == ["pytorch", "conv"]


def conv_plan(graph) -> KernelPlan:
    anchor = next(node for node in graph.nodes if node.op == "aten.conv2d.default")
    return KernelPlan("conv", "", "", (anchor.name,), (anchor.op,), anchor.name, (), (), anchor.spec.shape, (), ())


@pytest.mark.parametrize(
    ("dtype", "channels", "batch", "expected"),
    [
        (torch.float16, 64, 64, {"tile": (128, 128, 64), "warps": 8, "stages": 2}),
        (torch.float32, 64, 64, {"tile": (128, 64, 32), "warps": 4}),
        (torch.float32, 3, 1, {"tile": (64, 64, 16), "warps": 4}),
        (torch.bfloat16, 20, 1, {"tile": (64, 64, 32), "warps": 4}),
    ],
    ids=["large fp16", "large fp32", "small fp32 stem", "small bf16"],
)
def test_default_parameters_follow_the_problem_size(dtype, channels, batch, expected):
    graph = capture(nn.Conv2d(channels, 64, 3, padding=1).to(dtype), (randn(2, channels, 8, 8, dtype=dtype),))
    (user_input,) = [graph_input for graph_input in graph.inputs if graph_input.kind == "user_input"]
    batch_symbol, _, height_symbol, width_symbol = user_input.spec.shape
    # 56x56 feature maps: 64 x 3136 output pixels fill an H200's 132 SMs with 128 x 128 tiles, 1 x 3136 do not
    hints = {**graph.symbol_hints, batch_symbol: batch, height_symbol: 56, width_symbol: 56}
    hints |= {size: 56 for size in graph.nodes[0].spec.shape[2:]}
    graph = dataclasses.replace(graph, symbol_hints=hints)
    parameters = TEMPLATES["conv"].default_parameters(conv_plan(graph), graph)
    assert {name: parameters[name] for name in expected} == expected
    assert parameters["precision"] == "ieee"


def test_tf32_variants_are_offered_only_for_the_templates_the_users_settings_allow():
    graph = capture(ConvBlock(), (randn(2, 4, 6, 6),))
    (step,) = search_steps(graph, default_schedule(graph))

    def tf32_labels(tf32_templates):
        return [label for label, _ in step_alternatives(graph, step, tf32_templates=tf32_templates) if "tf32" in label]

    assert tf32_labels(()) == [] and tf32_labels(("matmul",)) == []
    assert tf32_labels(("conv",)) == ["conv precision=tf32"]
    # PyTorch's defaults: cuDNN may use TF32, float32 matmuls may not
    defaults = {"matmul_allow_tf32": False, "cudnn_allow_tf32": True, "float32_matmul_precision": "highest"}
    assert tf32_allowed(defaults) == ("conv",)
    assert tf32_allowed({**defaults, "cudnn_allow_tf32": False}) == ()
    assert tf32_allowed({**defaults, "float32_matmul_precision": "high"}) == ("conv", "matmul")
    assert tf32_allowed({**defaults, "matmul_allow_tf32": True, "cudnn_allow_tf32": False}) == ("matmul",)


DEPTHWISE_CASES = {
    "depthwise 3x3, padding 1": (nn.Conv2d(6, 6, 3, padding=1, groups=6), randn(2, 6, 9, 9), randn(3, 6, 11, 13)),
    "depthwise 7x7, padding 3 (ConvNeXt)": (nn.Conv2d(4, 4, 7, padding=3, groups=4), randn(2, 4, 10, 10), randn(1, 4, 13, 9)),
    "depthwise stride 2, no bias (MobileNet)": (
        nn.Conv2d(5, 5, 3, stride=2, padding=1, groups=5, bias=False), randn(2, 5, 9, 9), randn(2, 5, 12, 11),
    ),
    "depthwise, channel multiplier 2, dilation": (
        nn.Conv2d(3, 6, (3, 2), padding=(2, 1), dilation=(2, 1), groups=3), randn(2, 3, 8, 8), randn(1, 3, 9, 7),
    ),
    "depthwise conv1d, padding same": (nn.Conv1d(4, 4, 4, padding="same", groups=4), randn(2, 4, 12), randn(3, 4, 17)),
}


@pytest.mark.parametrize("case", list(DEPTHWISE_CASES), ids=list(DEPTHWISE_CASES))
def test_a_depthwise_convolution_matches_pytorch_at_odd_sizes(case, run_conv):
    model, capture_input, test_input = DEPTHWISE_CASES[case]
    program, actual, expected = run_conv(model, (capture_input,), (test_input,))
    assert program.kept_ops == () and len(program.kernels) == 1, program.schedule
    assert "no tl.dot" in program.kernel_block and "tl.dot(" not in program.kernel_block
    assert actual.shape == expected.shape
    torch.testing.assert_close(actual, expected, **FLOAT32)


def test_a_depthwise_convolution_fuses_its_epilogue_and_is_searched_without_tf32():
    block = nn.Sequential(nn.Conv2d(8, 8, 3, padding=1, groups=8), nn.Hardtanh(0.0, 6.0))
    graph = capture(block.eval(), (randn(2, 8, 6, 6),))
    (step,) = search_steps(graph, default_schedule(graph))
    labels = [label for label, _ in step_alternatives(graph, step, tf32_templates=("conv",))]
    assert "conv" in labels and not [label for label in labels if "tf32" in label]
    with pytest.raises(ScheduleError, match="nothing to compute in TF32"):
        compile_with(graph, schedule_choosing(graph, "conv").replace("precision=ieee", "precision=tf32"))

