"""The loss template: every loss it claims against PyTorch, with each reduction, at odd sizes and a new batch.

Captured at one batch size and run at another; strided inputs, low precision, NaN rows and both reduction strategies.
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

pytestmark = [
    pytest.mark.filterwarnings("ignore::RuntimeWarning"),  # the interpreter computes masked-off lanes too
    pytest.mark.filterwarnings("ignore:reduction. .mean. divides:UserWarning"),  # F.kl_div warns about its own mean
]


class Loss(nn.Module):
    """`function(*inputs)` as a module; forward takes two or three tensors."""

    def __init__(self, function, inputs: int = 2):
        super().__init__()
        self.function = function
        self.inputs = inputs

    def forward(self, x, y, z=None):
        return self.function(x, y) if self.inputs == 2 else self.function(x, y, z)


def normal(*shape):
    return torch.randn(shape)


def probability(*shape):
    return torch.rand(shape)


def sign(*shape):
    return torch.randn(shape).sign()


def classes(rows, count):
    return torch.randint(0, count, (rows,))


REDUCTION_CODES = {"none": 0, "mean": 1, "sum": 2}
# name -> (function of (inputs..., reduction), makers of each input from its shape, op it must replace)
ELEMENTWISE_CASES = {
    "mse_loss": (lambda x, y, r: F.mse_loss(x, y, reduction=r), (normal, normal), "aten.mse_loss.default"),
    "l1_loss": (lambda x, y, r: F.l1_loss(x, y, reduction=r), (normal, normal), "aten.l1_loss.default"),
    "smooth_l1_loss": (
        lambda x, y, r: F.smooth_l1_loss(x, y, reduction=r, beta=0.5), (normal, normal), "aten.smooth_l1_loss.default"
    ),
    # F.smooth_l1_loss calls l1_loss itself for beta=0; the ATen op must compute it too
    "smooth_l1_loss beta=0": (
        lambda x, y, r: torch.ops.aten.smooth_l1_loss(x, y, REDUCTION_CODES[r], 0.0), (normal, normal), "aten.smooth_l1_loss.default"
    ),
    "huber_loss": (lambda x, y, r: F.huber_loss(x, y, reduction=r, delta=0.7), (normal, normal), "aten.huber_loss.default"),
    "soft_margin_loss": (lambda x, y, r: F.soft_margin_loss(x * 4, y, reduction=r), (normal, sign), "aten.soft_margin_loss.default"),
    "binary_cross_entropy_with_logits": (
        lambda x, y, r: F.binary_cross_entropy_with_logits(x * 8, y, reduction=r),
        (normal, probability), "aten.binary_cross_entropy_with_logits.default",
    ),
    "binary_cross_entropy": (
        lambda x, y, r: F.binary_cross_entropy(x, y, reduction=r), (probability, probability), "aten.binary_cross_entropy.default"
    ),
    "kl_div": (lambda x, y, r: F.kl_div(x, y, reduction=r), (normal, probability), "aten.kl_div.default"),
    "kl_div log_target": (lambda x, y, r: F.kl_div(x, y, reduction=r, log_target=True), (normal, normal), "aten.kl_div.default"),
    "margin_ranking_loss": (
        lambda x, y, z, r: F.margin_ranking_loss(x, y, z, margin=0.3, reduction=r),
        (normal, normal, sign), "aten.margin_ranking_loss.default",
    ),
    "hinge_embedding_loss": (
        lambda x, y, r: F.hinge_embedding_loss(x, y, margin=0.5, reduction=r), (normal, sign), "aten.hinge_embedding_loss.default"
    ),
    "triplet_margin_loss": (
        lambda x, y, z, r: F.triplet_margin_loss(x, y, z, reduction=r),
        (normal, normal, normal), "aten.triplet_margin_loss.default",
    ),
    "triplet_margin_loss p=1 swap": (
        lambda x, y, z, r: F.triplet_margin_loss(x, y, z, p=1, swap=True, reduction=r),
        (normal, normal, normal), "aten.triplet_margin_loss.default",
    ),
}
CAPTURE_SHAPE = (4, 6)
TEST_SHAPE = (7, 13)


def loss_module(function, reduction: str, count: int) -> Loss:
    if count == 2:
        return Loss(lambda x, y: function(x, y, reduction), 2)
    return Loss(lambda x, y, z: function(x, y, z, reduction), 3)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("case", list(ELEMENTWISE_CASES), ids=list(ELEMENTWISE_CASES))
def test_loss_matches_pytorch_at_a_new_batch(case, reduction, run_hybrid):
    function, makers, op = ELEMENTWISE_CASES[case]
    model = loss_module(function, reduction, len(makers))
    program, actual, expected = run_hybrid(
        model, tuple(make(*CAPTURE_SHAPE) for make in makers), tuple(make(*TEST_SHAPE) for make in makers)
    )
    assert op in program.replaced_ops and program.kept_ops in ((), ("aten.broadcast_tensors.default",))
    one_loss_per_element = reduction == "none" and not case.startswith("triplet")
    assert program.schedule.startswith("kernel pointwise " if one_loss_per_element else "kernel loss ")
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
def test_cross_entropy_with_ignored_targets(reduction, run_hybrid):
    model = Loss(lambda x, y: F.cross_entropy(x, y, reduction=reduction, ignore_index=2))
    program, actual, expected = run_hybrid(
        model, (normal(4, 6), classes(4, 6)), (normal(9, 6) * 3, torch.tensor([0, 2, 5, 2, 1, 3, 4, 2, 0]))
    )
    assert program.replaced_ops == ("aten.cross_entropy_loss.default",)
    torch.testing.assert_close(actual, expected)


class WeightedClasses(nn.Module):
    def __init__(self, function, reduction: str):
        super().__init__()
        self.register_buffer("weight", torch.rand(6) + 0.5)
        self.function = function
        self.reduction = reduction

    def forward(self, x, y):
        return self.function(x, y, weight=self.weight, reduction=self.reduction, ignore_index=1)


@pytest.mark.parametrize(
    "function, reduction",
    [(F.cross_entropy, "mean"), (F.cross_entropy, "none"), (F.nll_loss, "mean"), (F.nll_loss, "sum")],
    ids=["cross_entropy mean", "cross_entropy none", "nll_loss mean", "nll_loss sum"],
)
def test_class_weights_scale_losses_and_the_mean(function, reduction, run_hybrid):
    program, actual, expected = run_hybrid(
        WeightedClasses(function, reduction), (normal(4, 6), classes(4, 6)), (normal(11, 6), classes(11, 6))
    )
    assert program.kept_ops == ()
    torch.testing.assert_close(actual, expected)


def test_cross_entropy_over_a_segmentation_map(run_hybrid):
    model = Loss(lambda x, y: F.cross_entropy(x, y, reduction="none") * 2)
    program, actual, expected = run_hybrid(
        model, (normal(2, 5, 3, 4), torch.randint(0, 5, (2, 3, 4))), (normal(3, 5, 7, 6), torch.randint(0, 5, (3, 7, 6)))
    )
    assert program.replaced_ops == ("aten.cross_entropy_loss.default", "aten.mul.Tensor")
    torch.testing.assert_close(actual, expected)


def test_a_target_that_does_not_match_the_input_raises_like_pytorch(compile_model, load_program, device):
    model = Loss(lambda x, y: F.cross_entropy(x, y))
    program = compile_model(model, (normal(2, 5, 3, 4), torch.randint(0, 5, (2, 3, 4))))
    forward = getattr(load_program(program), program.forward_function)
    x, target = normal(2, 5, 3, 4).to(device), torch.randint(0, 5, (2, 3, 5)).to(device)
    with pytest.raises(RuntimeError):
        model(x, target)
    with pytest.raises(RuntimeError, match="expected target size"):
        forward(model, x, target)


@pytest.mark.parametrize("reduction", ["none", "mean"])
def test_cross_entropy_propagates_nan_and_infinities_as_pytorch_does(reduction, run_hybrid):
    logits = normal(9, 6)
    logits[0, 2] = float("nan")
    logits[1] = float("-inf")
    logits[2, 3] = float("inf")
    logits[3, :3] = float("-inf")
    target = torch.tensor([1, 2, 0, 4, 5, 0, 3, 2, 1])
    model = Loss(lambda x, y: F.cross_entropy(x, y, reduction=reduction))
    program, actual, expected = run_hybrid(model, (normal(4, 6), classes(4, 6)), (logits, target))
    torch.testing.assert_close(actual, expected, equal_nan=True)


@pytest.mark.parametrize("function", [F.cross_entropy, F.nll_loss], ids=["cross_entropy", "nll_loss"])
def test_a_mean_over_only_ignored_targets_is_nan(function, run_hybrid):
    model = Loss(lambda x, y: function(x, y, ignore_index=3))
    program, actual, expected = run_hybrid(model, (normal(4, 6), classes(4, 6)), (normal(5, 6), torch.full((5,), 3)))
    assert program.kept_ops == () and torch.isnan(expected)
    torch.testing.assert_close(actual, expected, equal_nan=True)


def test_unbatched_cross_entropy_and_many_classes(run_hybrid):
    model = Loss(lambda x, y: (F.cross_entropy(x[0], y[0]), F.cross_entropy(x, y, reduction="none")))
    program, actual, expected = run_hybrid(model, (normal(4, 37), classes(4, 37)), (normal(5, 37) * 4, classes(5, 37)))
    assert program.replaced_ops.count("aten.cross_entropy_loss.default") == 2
    for got, want in zip(actual, expected, strict=True):
        torch.testing.assert_close(got, want)


ROW_CASES = {
    "cosine_similarity": (lambda x, y: F.cosine_similarity(x, y), (4, 6), (7, 13)),
    "cosine_similarity dim=0, broadcast": (lambda x, y: F.cosine_similarity(x, y, dim=0), (4, 6), (7, 13)),
    "pairwise_distance": (lambda x, y: F.pairwise_distance(x, y), (4, 6), (7, 13)),
    "pairwise_distance p=3": (lambda x, y: F.pairwise_distance(x, y, p=3), (4, 6), (7, 13)),
}


@pytest.mark.parametrize("case", list(ROW_CASES), ids=list(ROW_CASES))
def test_row_functions_match_pytorch(case, run_hybrid):
    function, capture_shape, test_shape = ROW_CASES[case]
    second_capture = (1, capture_shape[1]) if "broadcast" in case else capture_shape
    second_test = (1, test_shape[1]) if "broadcast" in case else test_shape
    program, actual, expected = run_hybrid(
        Loss(function), (normal(*capture_shape), normal(*second_capture)), (normal(*test_shape), normal(*second_test))
    )
    assert program.kept_ops == ()
    torch.testing.assert_close(actual, expected)


def test_cosine_similarity_clamps_each_norm_by_eps(run_hybrid):
    first, second = normal(5, 8), normal(5, 8)
    first[0] = 0.0
    first[1] = 1e-9
    second[1] = 1e-9
    program, actual, expected = run_hybrid(Loss(F.cosine_similarity), (normal(4, 8), normal(4, 8)), (first, second))
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize(
    "function, inputs",
    [
        (lambda x, y: F.mse_loss(x, y), lambda: (normal(13, 7).t(), normal(7, 13))),
        (lambda x, y: F.cross_entropy(x, y, reduction="none"), lambda: (normal(6, 9).t(), classes(9, 6))),
        (lambda x, y: F.cosine_similarity(x, y), lambda: (normal(13, 7).t(), normal(7, 13))),
        (lambda x, y: F.kl_div(x, y, reduction="sum"), lambda: (normal(13, 7).t(), probability(13, 7).t())),
    ],
    ids=["mse_loss", "cross_entropy", "cosine_similarity", "kl_div"],
)
def test_transposed_inputs_are_read_through_their_strides(function, inputs, run_hybrid):
    test_inputs = inputs()
    assert not test_inputs[0].is_contiguous()
    capture = tuple(value[:4, :6] if value.dim() == 2 else value[:4] for value in inputs())
    capture = (capture[0].contiguous(), capture[1].contiguous())
    program, actual, expected = run_hybrid(Loss(function), capture, test_inputs)
    assert program.kept_ops in ((), ("aten.broadcast_tensors.default",))
    torch.testing.assert_close(actual, expected)


LOW_PRECISION_CASES = {
    "mse_loss none": (lambda x, y: F.mse_loss(x, y, reduction="none"), (normal, normal)),
    "binary_cross_entropy_with_logits": (lambda x, y: F.binary_cross_entropy_with_logits(x * 5, y), (normal, probability)),
    "cross_entropy": (lambda x, y: F.cross_entropy(x * 3, y), (normal, lambda rows, count: classes(rows, count))),
    "cosine_similarity": (lambda x, y: F.cosine_similarity(x, y), (normal, normal)),
    "triplet_margin_loss": (lambda x, y, z: F.triplet_margin_loss(x, y, z), (normal, normal, normal)),
}


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
@pytest.mark.parametrize("case", list(LOW_PRECISION_CASES), ids=list(LOW_PRECISION_CASES))
def test_low_precision_losses_round_where_pytorch_does(case, dtype, run_hybrid):
    function, makers = LOW_PRECISION_CASES[case]

    def inputs(shape):
        values = tuple(make(*shape) for make in makers)
        return tuple(value.to(dtype) if value.is_floating_point() else value for value in values)

    program, actual, expected = run_hybrid(Loss(function, len(makers)), inputs((4, 6)), inputs((37, 29)))
    assert actual.dtype == dtype
    torch.testing.assert_close(actual, expected, atol=1e-2, rtol=1e-2)


class TemperatureCrossEntropy(nn.Module):
    """A prologue on the logits (a temperature) and an epilogue on the scalar loss."""

    def forward(self, x, y):
        return F.cross_entropy(x / 0.7, y) * 0.5 + 1.0


class ScaledLogitsLoss(nn.Module):
    """A prologue (tanh, scale) and an epilogue (sqrt, scale) around a per-element loss."""

    def forward(self, x, y):
        return F.binary_cross_entropy_with_logits(torch.tanh(x) * 3, y, reduction="none").sqrt() * 2


@pytest.mark.parametrize(
    "model, inputs, schedule",
    [
        (TemperatureCrossEntropy(), lambda rows: (normal(rows, 6), classes(rows, 6)), "kernel loss div,cross_entropy_loss,mul,add "),
        # one loss per element (reduction='none') is a pointwise op: it fuses as any other
        (ScaledLogitsLoss(), lambda rows: (normal(rows, 13), probability(rows, 13)), "kernel pointwise tanh,mul,binary_cross_entropy_with_logits,sqrt,mul_1 "),
        (Loss(lambda x, y: 1 - F.cosine_similarity(x * 2, y)), lambda rows: (normal(rows, 13), normal(rows, 13)), "kernel loss mul,cosine_similarity,rsub "),
    ],
    ids=["cross_entropy", "binary_cross_entropy_with_logits none", "cosine_similarity"],
)
def test_prologue_and_epilogue_fuse_with_the_loss(model, inputs, schedule, run_hybrid):
    program, actual, expected = run_hybrid(model, inputs(4), inputs(7))
    assert program.schedule.startswith(schedule) and program.kept_ops == ()
    torch.testing.assert_close(actual, expected)


def compile_and_load(model, example, load_program, schedule=None):
    graph = capture_graph(model.eval(), example)
    params = [graph_input.target for graph_input in graph.inputs if graph_input.kind == "user_input"]
    program = compile_graph(graph, prefix="model", forward_params=params, has_self=True, schedule=schedule)
    return program, getattr(load_program(program), program.forward_function)


@pytest.mark.parametrize(
    "model, inputs",
    [
        (TemperatureCrossEntropy(), lambda rows: (normal(rows, 6), classes(rows, 6))),
        (Loss(lambda x, y: F.smooth_l1_loss(x, y, reduction="sum")), lambda rows: (normal(rows, 13), normal(rows, 13))),
    ],
    ids=["cross_entropy mean", "smooth_l1_loss sum"],
)
@pytest.mark.parametrize("strategy", [("partials", 4, 2), ("single", 2, 4)], ids=["partials", "single"])
def test_non_default_schedules_compute_the_same_loss_deterministically(model, inputs, strategy, load_program, device):
    default, _ = compile_and_load(model, inputs(4), load_program)
    reduction, block, columns = strategy
    script = re.sub(
        r"reduction=\w+ block=\d+ columns=\d+", f"reduction={reduction} block={block} columns={columns}", default.schedule
    )
    assert script != default.schedule and print_schedule(parse_schedule(script)) == script
    program, forward = compile_and_load(model, inputs(4), load_program, schedule=script)
    assert program.schedule == script
    test_inputs = tuple(value.to(device) for value in inputs(11))
    first, second = forward(model, *test_inputs), forward(model, *test_inputs)
    assert torch.equal(first, second)
    torch.testing.assert_close(first, model(*test_inputs))


def test_large_reductions_default_to_partial_sums(compile_model):
    program = compile_model(Loss(lambda x, y: F.l1_loss(x, y)), (normal(512, 512), normal(512, 512)))
    assert "kernel loss l1_loss reduction=partials " in program.schedule
    assert "_finish_kernel" in program.kernel_block


@pytest.mark.parametrize(
    "function, inputs",
    [
        (lambda x, y: F.cross_entropy(x, y, label_smoothing=0.1), lambda: (normal(4, 6), classes(4, 6))),
        (lambda x, y: F.cross_entropy(x, y.softmax(1)), lambda: (normal(4, 6), normal(4, 6))),
        (lambda x, y: F.pairwise_distance(x, y, keepdim=True), lambda: (normal(4, 6), normal(4, 6))),
        (lambda x, y: F.mse_loss(x, y), lambda: (normal(4, 6), normal(4, 6).double())),
    ],
    ids=["label smoothing", "probability targets", "keepdim", "mixed dtypes"],
)
def test_losses_it_does_not_compute_exactly_stay_in_pytorch(function, inputs, compile_model):
    program = compile_model(Loss(function), inputs())
    assert not any(op.startswith(("aten.cross_entropy", "aten.pairwise", "aten.mse")) for op in program.replaced_ops)
