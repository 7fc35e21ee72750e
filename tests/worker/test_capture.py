"""Capture turns a module into a flat OpGraph with free dims as symbols, or names the bad line.

Runs torch.export in the test process (tests only: the product runs it in a worker).
"""

from __future__ import annotations

import functools
import json
import math
import threading
from pathlib import Path

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.engine.search import tf32_allowed
from drtriton_lsp.errors import CaptureError
from drtriton_lsp.runners.protocol import GPU_LOCK_VARIABLE
from drtriton_lsp.task import Task
from drtriton_lsp.worker.capture import capture, capture_graph
from drtriton_lsp.worker.capture_job import run_capture
from drtriton_lsp.worker.gpu_lock import gpu_hold


class LinearGelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 32)

    def forward(self, x):
        return torch.nn.functional.gelu(self.fc(x)) * 2.0


class DataDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # the line capture must name
            return x
        return -x


def test_graph_lists_ops_in_order_with_symbolic_batch():
    graph = capture_graph(LinearGelu().eval(), (torch.randn(4, 16),))
    assert [node.op for node in graph.nodes] == ["aten.linear.default", "aten.gelu.default", "aten.mul.Tensor"]
    batch = graph.nodes[0].spec.shape[0]
    assert isinstance(batch, str) and graph.symbol_hints[batch] == 4
    assert graph.nodes[0].spec.shape[1] == 32
    kinds = {i.target: i.kind for i in graph.inputs}
    assert kinds == {"fc.weight": "parameter", "fc.bias": "parameter", "x": "user_input"}


def test_graph_round_trips_through_json():
    graph = capture_graph(LinearGelu().eval(), (torch.randn(4, 16),))
    again = OpGraph.from_json(json.loads(json.dumps(graph.to_json())))
    assert again == graph


def test_data_dependent_control_flow_names_the_line():
    with pytest.raises(CaptureError) as caught:
        capture_graph(DataDependent(), (torch.randn(3),), Path(__file__))
    source_lines = Path(__file__).read_text().splitlines()
    assert "the line capture must name" in source_lines[caught.value.line - 1]
    assert "torch.where" in caught.value.hint


class CapitalisedParameters(nn.Module):
    def forward(self, A, B, scale: float, C):
        return A @ B * scale + C


class ListArgument(nn.Module):
    def forward(self, Weights, pair):
        return Weights * pair[0] + pair[1]


def user_input_targets(graph: OpGraph) -> list[str]:
    return [graph_input.target for graph_input in graph.inputs if graph_input.kind == "user_input"]


def test_user_inputs_are_named_after_the_forward_parameters_whatever_their_case():
    # torch.export names the placeholders a, b, scale, c
    graph = capture_graph(CapitalisedParameters(), (torch.randn(4, 4), torch.randn(4, 4), 2.0, torch.randn(4, 4)))
    assert user_input_targets(graph) == ["A", "B", "scale", "C"]


def test_an_argument_of_several_tensors_keeps_the_placeholder_names():
    graph = capture_graph(ListArgument(), (torch.randn(3), [torch.randn(3), torch.randn(3)]))
    assert user_input_targets(graph) == ["Weights", "pair_0", "pair_1"]


class ConvBlock(nn.Module):
    """Model code's in-place habits: an in-place activation after batch norm, and `+=` into a fresh value."""

    def __init__(self, activation: nn.Module):
        super().__init__()
        self.dropout = nn.Dropout(0.1)
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.activation = activation

    def forward(self, x, skip):
        out = self.activation(self.bn(self.conv(self.dropout(x))))
        out += skip
        return F.relu(out, inplace=True)


def ops_of(graph: OpGraph) -> list[str]:
    return [node.op for node in graph.nodes]


@pytest.mark.parametrize(
    ("activation", "op"),
    [
        (nn.ReLU(inplace=True), "aten.relu.default"),
        (nn.SiLU(inplace=True), "aten.silu.default"),
        (nn.Hardtanh(inplace=True), "aten.hardtanh.default"),
        (nn.LeakyReLU(0.2, inplace=True), "aten.leaky_relu.default"),
    ],
)
def test_in_place_ops_on_fresh_values_are_captured_as_functional_ops(activation, op):
    graph = capture_graph(ConvBlock(activation).eval(), (torch.randn(2, 3, 8, 8), torch.randn(2, 4, 8, 8)))
    # the ops the model called stay as they were (export's functionalisation would make the dropout a clone)
    assert ops_of(graph) == [
        "aten.dropout.default", "aten.conv2d.default", "aten.batch_norm.default", op, "aten.add.Tensor",
        "aten.relu.default",
    ]


class WritesItsInput(nn.Module):
    def forward(self, x):
        x.add_(1)
        return x.relu()


class WritesThroughAView(nn.Module):
    def forward(self, x):
        doubled = x * 2
        flat = doubled.view(-1)
        doubled.relu_()
        return flat


class WritesAnAliasOfItsInput(nn.Module):
    def forward(self, x):
        same = F.dropout(x, 0.1, training=False)  # in eval mode, dropout returns x itself
        same.relu_()
        return same * 2


class ChangesTheResultType(nn.Module):
    def forward(self, x):
        doubled = x * 2
        doubled.gt_(0)  # writes 0.0/1.0 floats where the functional gt would give bools
        return doubled


def in_place_ops(graph: OpGraph) -> list[str]:
    return [op for op in ops_of(graph) if op.startswith("aten.") and op.split(".")[1].endswith("_")
            and not op.split(".")[1].startswith("_")]


@pytest.mark.parametrize(
    ("model", "functional_ops"),
    [
        (WritesThroughAView(), ["aten.mul.Tensor", "aten.relu.default", "aten.view.default"]),
        # gt_ keeps its target's float dtype: export's functionalisation casts the bools back
        (ChangesTheResultType(), ["aten.mul.Tensor", "aten.gt.Scalar", "aten._to_copy.default"]),
    ],
)
def test_writes_export_tracks_every_alias_of_are_functionalised(model, functional_ops):
    assert ops_of(capture_graph(model, (torch.randn(3, 4),))) == functional_ops


class WritesASliceOfAFreshTensor(nn.Module):
    def forward(self, x, part):
        out = torch.zeros_like(x)
        out[:, :2] = part.relu()
        return out * 2


class WritesASliceOfItsInput(nn.Module):
    def forward(self, x):
        x[:, 0] = x[:, 1]
        return x * 2


class WritesASliceSeenThroughDropout(nn.Module):
    def forward(self, x):
        doubled = x * 2
        same = F.dropout(doubled, 0.1, training=False)  # the same tensor in eager; export records a new one
        doubled[:, 0] = x[:, 1]
        return same


def test_writes_into_a_slice_of_memory_the_forward_allocated_are_functionalised():
    graph = capture_graph(WritesASliceOfAFreshTensor(), (torch.randn(3, 4), torch.randn(3, 2)))
    assert "aten.slice_scatter.default" in ops_of(graph) and not in_place_ops(graph)


@pytest.mark.parametrize(
    ("model", "in_place_op"),
    [
        (WritesItsInput(), "aten.add_.Tensor"),
        (WritesAnAliasOfItsInput(), "aten.relu_.default"),
        (WritesASliceOfItsInput(), "aten.copy_.default"),
        (WritesASliceSeenThroughDropout(), "aten.copy_.default"),
    ],
)
def test_writes_that_could_reach_an_input_or_an_untracked_alias_stay_in_place(model, in_place_op):
    assert in_place_ops(capture_graph(model, (torch.randn(3, 4),))) == [in_place_op]


class DecomposedNorms(nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(8))
        self.bias = nn.Parameter(torch.randn(8))
        self.group_weight = nn.Parameter(torch.randn(4))

    def forward(self, x, image):
        normalised = torch.ops.aten.native_layer_norm(x, [8], self.weight, self.bias, 1e-5)[0]
        mean = torch.ops.aten.native_layer_norm(x, [8], self.weight, self.bias, 1e-5)[1]
        batch, channels, height, width = image.shape
        grouped = torch.ops.aten.native_group_norm(
            image, self.group_weight, None, batch, channels, height * width, 2, 1e-5
        )[0]
        return normalised * mean, grouped


def test_decomposed_norms_whose_statistics_nothing_reads_become_the_composite_ops():
    graph = capture_graph(DecomposedNorms(), (torch.randn(3, 8), torch.randn(2, 4, 3, 5)))
    ops = ops_of(graph)
    assert ops.count("aten.layer_norm.default") == 1 and ops.count("aten.group_norm.default") == 1
    # the second layer norm's mean is read, which layer_norm does not return
    assert ops.count("aten.native_layer_norm.default") == 1


class CopiesToView(nn.Module):
    """Copies made only to be viewed (a shifted slice, merged heads), one also read elsewhere, one view returned."""

    def forward(self, logits, heads):
        shifted = logits[:, :-1].contiguous().view(-1, logits.shape[-1])
        merged = heads.transpose(1, 2).clone(memory_format=torch.contiguous_format).view(heads.shape[0], heads.shape[2], -1)
        kept = heads[:, 1:].contiguous()
        also_read = kept.view(-1) + kept.sum()
        returned = logits[:, 1:].contiguous().view(-1)
        return shifted.float().softmax(-1), merged * 2, also_read, returned


def test_a_copy_only_a_view_reads_is_captured_as_the_reshape_it_stands_for():
    model = CopiesToView()
    example = (torch.randn(2, 5, 6), torch.randn(2, 3, 4, 5))
    graph = capture_graph(model, example)
    reshaped = [node.args[0]["ref"] for node in graph.nodes if node.op == "aten.reshape.default"]
    assert reshaped == ["slice_2", "transpose"]
    # the copy something else reads, and the view the forward returns, stay as written
    assert ops_of(graph).count("aten.contiguous.default") == 2 and ops_of(graph).count("aten.view.default") == 2


def test_a_graph_that_writes_in_place_keeps_its_copies():
    class WritesAfterViewing(nn.Module):
        def forward(self, x, y):
            viewed = x[:, 1:].contiguous().view(-1)
            y.add_(1.0)
            return viewed * y.sum()

    graph = capture_graph(WritesAfterViewing(), (torch.randn(3, 4), torch.randn(2)))
    assert "aten.reshape.default" not in ops_of(graph)


@functools.lru_cache(maxsize=8)
def attention_scale(width: int) -> float:
    return 1.0 / math.sqrt(width)


class CachesBySize(nn.Module):
    """Keys a cache on an input size: with free sizes the size is a SymInt, which is unhashable, so export fails."""

    def forward(self, x):
        return torch.softmax(x * attention_scale(x.shape[-1]), dim=-1)


def test_a_model_export_cannot_trace_with_free_sizes_is_captured_at_its_example_sizes():
    example = torch.randn(2, 5, 8)
    captured = capture(CachesBySize(), (example,))  # the retry gets the very tensors the failed export saw
    assert captured.graph.symbol_hints == {}
    assert [graph_input.spec.shape for graph_input in captured.graph.inputs] == [(2, 5, 8)]
    assert "could not leave the input sizes free (TypeError: unhashable type" in captured.static_note


def test_a_model_with_free_sizes_has_no_capture_note():
    assert capture(LinearGelu().eval(), (torch.randn(4, 16),)).static_note == ""


class PoolsToOneRow(nn.Module):
    """Pools a free height of 3 to 1: torch.export then says the next op's height is 1 at every input size."""

    def __init__(self):
        super().__init__()
        self.norm = nn.InstanceNorm2d(4, affine=True)

    def forward(self, x):
        return self.norm(F.hardswish(F.max_pool2d(x, kernel_size=3, stride=2)))


def test_sizes_export_gets_wrong_at_other_input_sizes_make_the_capture_fall_back_to_the_example_sizes():
    example = torch.randn(2, 4, 3, 7)
    captured = capture(PoolsToOneRow(), (example,))
    assert "its sizes do not hold at other input sizes: `hardswish` has sizes" in captured.static_note
    assert captured.graph.symbol_hints == {}
    assert [node.outputs[0].shape for node in captured.graph.nodes] == [(2, 4, 1, 3)] * 3
    # a height that pools to more than one row is exported right, sizes free
    assert capture(PoolsToOneRow(), (torch.randn(2, 4, 7, 7),)).static_note == ""


TASK_WITH_A_SIZE_CACHE = """
import functools, math
import torch
from torch import nn


@functools.lru_cache(maxsize=8)
def attention_scale(width):
    return 1.0 / math.sqrt(width)


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x * attention_scale(x.shape[-1]), dim=-1)


def get_inputs():
    return [torch.randn(2, 5, 8)]
"""


def test_the_capture_job_says_why_the_sizes_are_fixed():
    task = Task(name="Model", kind="module", source=TASK_WITH_A_SIZE_CACHE)
    messages: list[str] = []
    result = run_capture({"task": task.to_json()}, messages.append)
    assert "unhashable" in result["capture_note"] and result["capture_note"] in messages


TASK_WITH_TF32_MATMULS = """
import torch

torch.set_float32_matmul_precision("high")


class Model(torch.nn.Module):
    def forward(self, a, b):
        return torch.relu(a @ b)


def get_inputs():
    return [torch.randn(4, 8), torch.randn(8, 4)]
"""


def test_the_capture_job_reports_the_users_precision_settings_once_their_module_is_imported(monkeypatch):
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", True)
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", False)
    previous = torch.get_float32_matmul_precision()
    try:
        result = run_capture({"task": Task(name="Model", kind="module", source=TASK_WITH_TF32_MATMULS).to_json()},
                             lambda _message: None)
    finally:
        torch.set_float32_matmul_precision(previous)
    assert result["precision"]["float32_matmul_precision"] == "high" and result["precision"]["cudnn_allow_tf32"]
    assert tf32_allowed(result["precision"]) == ("conv", "matmul")


def test_a_capture_beside_other_jobs_waits_while_a_timing_holds_the_gpu(tmp_path, monkeypatch):
    monkeypatch.setenv(GPU_LOCK_VARIABLE, str(tmp_path / "gpu.lock"))
    task = Task(name="Model", kind="module", source=TASK_WITH_TF32_MATMULS)
    messages: list[str] = []
    results = []
    with gpu_hold(exclusive=True):
        capturing = threading.Thread(target=lambda: results.append(run_capture({"task": task.to_json()}, messages.append)))
        capturing.start()
        capturing.join(timeout=1.0)
        assert capturing.is_alive() and messages == []  # not even importing the task while the timing runs
    capturing.join(timeout=120)
    assert not capturing.is_alive() and results and results[0]["graph"]
