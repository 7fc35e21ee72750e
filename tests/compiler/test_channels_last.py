"""Channels-last convolutions: `keep <conv> layout=channels_last`, kernels that follow their input's layout, and the
search's whole-graph layout step.

A kept convolution given a channels-last input writes a channels-last output; the pointwise and inference batch-norm
kernels after it then run over memory in that order and write channels-last too (as PyTorch's own ops do), so the next
convolution's input needs no conversion, and the forward hands its results back in PyTorch's default layout.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from drtriton_lsp.compiler.errors import ScheduleError
from drtriton_lsp.compiler.fragments import channels_last_schedule
from drtriton_lsp.compiler.planner import default_schedule
from drtriton_lsp.compiler.script import KeepLine, parse_schedule, print_schedule
from drtriton_lsp.engine.search import SearchBudget, WholeProgram, search_schedule
from drtriton_lsp.task import Task
from schedule_helpers import capture, compile_with

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter computes masked-off lanes too

CHANNELS_LAST = torch.channels_last


def is_channels_last(tensor: torch.Tensor) -> bool:
    return not tensor.is_contiguous() and tensor.is_contiguous(memory_format=CHANNELS_LAST)


class ResidualBlock(nn.Module):
    """conv -> batch norm -> ReLU -> conv -> batch norm (+ the first block's output) -> ReLU, then a per-channel gate:
    every kernel kind the layout has to pass through, and a view of the result."""

    def __init__(self, channels: int = 6):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.conv2 = nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        self.gate = nn.Parameter(torch.rand(channels, 1, 1))
        with torch.no_grad():
            for norm in (self.bn1, self.bn2):
                norm.weight.uniform_(0.5, 1.5), norm.bias.uniform_(-0.5, 0.5)
                norm.running_mean.uniform_(-0.5, 0.5), norm.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        first = torch.relu(self.bn1(self.conv1(x)))
        second = torch.relu(self.bn2(self.conv2(first)) + first)
        gated = torch.sigmoid(second) * self.gate
        return gated, gated.flatten(1)


@pytest.fixture(scope="module")
def block_graph():
    return capture(ResidualBlock(), (torch.randn(2, 6, 5, 7),))


def test_a_keep_line_takes_a_layout_and_reads_back_the_same():
    text = "keep conv2d layout=channels_last\nkeep relu\n"
    schedule = parse_schedule(text)
    assert schedule.steps == (KeepLine("conv2d", "channels_last"), KeepLine("relu"))
    assert print_schedule(schedule) == text
    for wrong in ("keep conv2d layout=nhwc\n", "keep conv2d memory=channels_last\n", "keep conv2d a b\n"):
        with pytest.raises(ScheduleError):
            parse_schedule(wrong)


def test_only_a_convolution_of_a_batch_of_images_takes_the_layout(block_graph):
    relaid = channels_last_schedule(block_graph, default_schedule(block_graph))
    assert [line.node for line in relaid.steps if isinstance(line, KeepLine) and line.layout] == ["conv2d", "conv2d_1"]
    lines = print_schedule(relaid).splitlines(keepends=True)
    lines[1] = "keep batch_norm layout=channels_last\nkeep relu\n"  # the batch norm's kernel line, kept
    with pytest.raises(ScheduleError, match="2-d convolution"):
        compile_with(block_graph, "".join(lines))
    one_dimensional = capture(nn.Conv1d(3, 4, 3), (torch.randn(2, 3, 9),))
    assert channels_last_schedule(one_dimensional, default_schedule(one_dimensional)) is None


def test_the_block_runs_channels_last_and_returns_pytorchs_layout(block_graph, load_program, device):
    model = ResidualBlock().eval().to(device)
    program = compile_with(block_graph, print_schedule(channels_last_schedule(block_graph, default_schedule(block_graph))))
    module = load_program(program)
    assert "torch.ops.aten.conv2d.default(model_to_channels_last(x), " in program.kernel_block
    seen: dict[str, torch.Tensor] = {}
    for wrapper in [name for name in dir(module) if name.startswith("model_fused_") and "_kernel" not in name]:
        function = getattr(module, wrapper)

        def recording(*arguments, _function=function, _name=wrapper):
            result = _function(*arguments)
            seen[_name] = result
            return result

        setattr(module, wrapper, recording)
    x = torch.randn(3, 6, 7, 4, device=device)
    with torch.no_grad():
        expected = model(x)
        gated, flat = getattr(module, program.forward_function)(model, x)
    torch.testing.assert_close(gated, expected[0], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(flat, expected[1], atol=1e-5, rtol=1e-5)
    assert gated.is_contiguous() and flat.is_contiguous()
    # every kernel after a channels-last convolution wrote channels-last: the next convolution converts nothing
    kernels = {name: tensor for name, tensor in seen.items() if "channels_last" not in name and "over_nhwc" not in name}
    assert kernels and all(is_channels_last(tensor) for tensor in kernels.values()), {
        name: tensor.stride() for name, tensor in kernels.items()
    }


@pytest.mark.parametrize("layout", ["strided", "channels_last", "contiguous"])
def test_the_conversion_lays_out_any_input_channels_last(block_graph, load_program, layout, device):
    program = compile_with(block_graph, print_schedule(channels_last_schedule(block_graph, default_schedule(block_graph))))
    convert = load_program(program).model_to_channels_last
    x = torch.randn(3, 5, 7, 6, device=device)
    given = {
        "strided": torch.randn(3, 7, 6, 10, device=device)[..., ::2].permute(0, 3, 1, 2),
        "channels_last": x.contiguous(memory_format=CHANNELS_LAST),
        "contiguous": x,
    }[layout]
    relaid = convert(given)
    assert relaid.is_contiguous(memory_format=CHANNELS_LAST) and torch.equal(relaid, given)
    assert (relaid is given) == (layout == "channels_last")


class ConvNeXtStem(nn.Module):
    """A depthwise convolution with a bias whose result is read as [N, H, W, C] (a ConvNeXt block's first half): the
    layer norm and the linear after it read it so; `reads_nchw` adds a second reader of the convolution's own layout."""

    def __init__(self, channels: int = 8, reads_nchw: bool = False):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 7, padding=3, groups=channels)
        self.norm = nn.LayerNorm(channels)
        self.linear = nn.Linear(channels, 2 * channels)
        self.reads_nchw = reads_nchw

    def forward(self, x):
        y = self.conv(x)
        out = self.linear(self.norm(y.permute(0, -2, -1, 1)))
        return out + y.sum() if self.reads_nchw else out


def test_a_convolution_read_as_channels_last_runs_so_by_default(load_program, device):
    model = ConvNeXtStem().eval().to(device)
    graph = capture(ConvNeXtStem(), (torch.randn(2, 8, 9, 9),))
    schedule = default_schedule(graph)
    assert schedule.steps[0] == KeepLine("conv2d", "channels_last")
    # the bias, which cuDNN's channels-last kernels add in a pass of their own, is added by the layer norm's prologue
    assert graph.nodes[0].args[2] is None and print_schedule(schedule).splitlines()[1].startswith(
        "kernel normalize add,layer_norm "
    )
    program = compile_with(graph, print_schedule(schedule))
    x = torch.randn(3, 8, 11, 10, device=device)
    with torch.no_grad():
        expected = model(x)
        actual = getattr(load_program(program), program.forward_function)(model, x)
    torch.testing.assert_close(actual, expected, atol=1e-4, rtol=1e-4)
    # a reader of the [N, C, H, W] order keeps PyTorch's layout; so does a convolution no one permutes
    # so does its bias
    for other, channels in ((ConvNeXtStem(reads_nchw=True), 8), (ResidualBlock(), 6)):
        graph = capture(other, (torch.randn(2, channels, 9, 9),))
        assert not [line for line in default_schedule(graph).steps if isinstance(line, KeepLine) and line.layout]
    assert capture(ConvNeXtStem(reads_nchw=True), (torch.randn(2, 8, 9, 9),)).nodes[0].args[2] is not None


def test_kernels_given_a_contiguous_input_keep_the_default_layout(block_graph, load_program, device):
    program = compile_with(block_graph)
    module = load_program(program)
    model = ResidualBlock().eval().to(device)
    x = torch.randn(2, 6, 5, 7, device=device)
    with torch.no_grad():
        gated, _ = getattr(module, program.forward_function)(model, x)
        torch.testing.assert_close(gated, model(x)[0], atol=1e-5, rtol=1e-5)
        # a user's channels-last input: the hybrid follows it as eager does (the kept convolutions write channels-last)
        gated_cl, _ = getattr(module, program.forward_function)(model, x.contiguous(memory_format=CHANNELS_LAST))
    torch.testing.assert_close(gated_cl, gated, atol=1e-5, rtol=1e-5)
    assert gated.is_contiguous()


class MixedLayouts(nn.Module):
    """Pointwise ops over [N, C, H, W] inputs and an [N, H, W, C] one read permuted, with a per-channel scale: one
    kernel whose full-size inputs may lie in different memory orders."""

    def forward(self, x, y_nhwc, scale, z):
        return torch.relu(x + y_nhwc.permute(0, 3, 1, 2) * scale.view(-1, 1, 1)) - x * z


class LaunchCounter:
    """Stands in for a kernel object in a loaded program: counts `kernel[grid](...)` launches."""

    def __init__(self, kernel):
        self.kernel, self.launches = kernel, 0

    def __getitem__(self, grid):
        self.launches += 1
        return self.kernel[grid]


@pytest.mark.parametrize(
    ("x_layout", "y_layout", "tiled"),
    [
        ("contiguous", "nhwc", True),
        ("channels_last", "nchw", True),
        ("channels_last", "nhwc", False),
        ("contiguous", "nchw", False),
    ],
    ids=["nchw + nhwc", "channels-last + nchw", "one layout, channels-last", "one layout, nchw"],
)
def test_inputs_in_both_layouts_are_read_in_tiles_along_their_own_memory(load_program, device, x_layout, y_layout, tiled):
    example = torch.randn(2, 5, 6, 7)
    graph = capture(MixedLayouts(), (example, example.permute(0, 2, 3, 1), torch.randn(5), example))
    program = compile_with(graph)
    module = load_program(program)
    [kernel] = [name for name in dir(module) if name.endswith("_kernel_tiled")]
    counter = LaunchCounter(getattr(module, kernel))
    setattr(module, kernel, counter)
    # 70 channels and 9 x 8 pixels: two partial tiles along each
    x = torch.randn(3, 70, 9, 8, device=device)
    x = x.contiguous(memory_format=CHANNELS_LAST) if x_layout == "channels_last" else x
    y_nchw = torch.randn(3, 70, 9, 8, device=device)
    # y as the model takes it, [N, H, W, C]: permuted back it is channels-last (nhwc) or row-major (nchw) memory
    y = y_nchw.permute(0, 2, 3, 1).contiguous() if y_layout == "nhwc" else y_nchw.permute(0, 2, 3, 1)
    scale = torch.randn(70, device=device)
    z = torch.randn(3, 70, 9, 16, device=device)[..., ::2]  # in neither layout: read through its strides
    result, expected = getattr(module, program.forward_function)(None, x, y, scale, z), MixedLayouts()(x, y, scale, z)
    torch.testing.assert_close(result, expected, atol=1e-5, rtol=1e-5)
    assert counter.launches == int(tiled)
    # written in the layout eager gives (x's), tiled or not: a caller's `.view` works on both alike
    assert result.stride() == expected.stride()


def layout_measurer(channels_last_ms: float, default_ms: float = 1.0, channels_last_verified: bool = True):
    """Stand-in for the GPU: fragments as the default, the whole graph faster or slower channels-last."""
    seen = []

    def measure(task, fragment, candidates, stop):
        outcomes = []
        for source in candidates:
            relaid = "Search candidate 'channels_last'" in source
            seen.append(task.name)
            if relaid:
                assert "_to_channels_last(x)" in source
                outcomes.append((channels_last_verified, "" if channels_last_verified else "wrong_result",
                                 channels_last_ms if channels_last_verified else None))
            else:
                outcomes.append((True, "", default_ms if "Search candidate 'default'" in source else 5.0))
        return 2.0, outcomes

    measure.seen = seen
    return measure


@pytest.mark.parametrize("channels_last_ms, verified, chosen", [(0.5, True, "channels_last"), (1.5, True, "default"),
                                                                 (0.1, False, "default")])
def test_the_search_measures_the_whole_graph_in_both_layouts(block_graph, channels_last_ms, verified, chosen):
    measure = layout_measurer(channels_last_ms, channels_last_verified=verified)
    result = search_schedule(block_graph, default_schedule(block_graph), name="block", measure=measure,
                             budget=SearchBudget())
    layouts = result.fragments[0]
    assert layouts.ops == ["conv2d", "conv2d_1"] and layouts.chosen == chosen
    assert [alternative.label for alternative in layouts.alternatives] == ["default", "channels_last"]
    assert ("layout=channels_last" in result.schedule) == (chosen == "channels_last")
    assert "block_layouts" in measure.seen and not result.stopped
    # the convolutions' own steps are not measured alone once they run channels-last (their input would be converted)
    assert any(fragment.ops[0] == "conv2d" for fragment in result.fragments[1:]) == (chosen == "default")
    compile_with(block_graph, result.schedule)


def test_too_small_a_budget_for_both_layouts_leaves_it_to_the_kernel_lines(block_graph):
    result = search_schedule(block_graph, default_schedule(block_graph), name="block",
                             measure=layout_measurer(0.5), budget=SearchBudget(candidates=1))
    assert result.stopped == "budget" and "layout=" not in result.schedule
    assert [fragment.ops for fragment in result.fragments] == [["conv2d"]]  # the first kernel step, not the layouts


def test_given_the_target_the_layout_step_measures_its_written_back_module(block_graph):
    """The user's module, guards included, not a fragment task with its weights as inputs."""
    target = Task(name="block", kind="module", source="# the user's file\n")
    asked: list[tuple[str, list[str]]] = []

    def measure(task, graph, candidates, stop):
        asked.append((task.name, candidates))
        return 2.0, [(True, "", _written_ms(source)) for source in candidates]

    written = WholeProgram(target, lambda schedule: f"# written back\n# {schedule.replace(chr(10), ' | ')}\n")
    result = search_schedule(block_graph, default_schedule(block_graph), name="block", measure=measure,
                             budget=SearchBudget(), whole=written)
    task_name, sources = asked[0]
    assert task_name == "block" and all(source.startswith("# written back") for source in sources)
    assert "keep conv2d layout=channels_last" in sources[1] and "layout=" not in sources[0]
    assert result.fragments[0].chosen == "channels_last" and "keep conv2d layout=channels_last" in result.schedule
    # then the replay step: the same written-back module, its forward run plainly and replayed as CUDA graphs
    task_name, sources = asked[1]
    assert task_name == "block" and ["replay cuda_graph" in source for source in sources] == [False, True]
    assert all("keep conv2d layout=channels_last" in source for source in sources)
    assert result.fragments[1].ops == ["replay"] and result.fragments[1].chosen == "cuda_graph"
    assert result.schedule.endswith("replay cuda_graph\n")
    assert all(name != "block" for name, _ in asked[2:])  # the kernel lines' steps still measure fragments


def _written_ms(source: str) -> float:
    """A written-back module's time in the stand-in measurer: channels-last and replay each save time."""
    return 1.0 - 0.5 * ("layout=channels_last" in source) - 0.1 * ("replay cuda_graph" in source)
