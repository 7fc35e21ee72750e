"""Losses with reduction='none' are pointwise ops: they fuse with the ops around them and into a reduction's prologue.

A masked or weighted loss written the way model code writes it (a per-element loss, arithmetic, then a sum or mean)
becomes one reduce kernel that reads its inputs once, with PyTorch's values in float32 and in low precision.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter computes masked-off lanes too


class FocalLoss(nn.Module):
    """The sigmoid focal loss of dense detectors, summed and divided by the count of positive targets."""

    def forward(self, logits, targets):
        probability = logits.sigmoid()
        bce = F.binary_cross_entropy_with_logits(logits, targets, reduction="none")
        positive = targets == 1
        p_t = torch.where(positive, probability, 1 - probability)
        alpha_t = torch.where(positive, 0.25, 0.75)
        return (alpha_t * (1 - p_t).pow(2.0) * bce).sum() / targets.sum().clamp(min=1.0)


class MaskedRegression(nn.Module):
    """Three regression losses per element, weighted by a broadcast mask, averaged over the valid positions."""

    def forward(self, prediction, target, mask):
        per_element = (
            F.mse_loss(prediction, target, reduction="none")
            + F.smooth_l1_loss(prediction, target, reduction="none", beta=0.5)
            + F.huber_loss(prediction, target, reduction="none", delta=0.7)
        )
        return (per_element * mask).mean(dim=-1)


class WeightedLogits(nn.Module):
    """BCE with logits with a per-class weight and a positive-class weight, both broadcast along the rows."""

    def __init__(self, classes: int):
        super().__init__()
        self.register_buffer("weight", torch.rand(classes) + 0.5)
        self.register_buffer("pos_weight", torch.rand(classes) * 3)

    def forward(self, logits, targets):
        loss = F.binary_cross_entropy_with_logits(
            logits * 4, targets, weight=self.weight, pos_weight=self.pos_weight, reduction="none"
        )
        return loss.sum(dim=0)


def one_hot_targets(rows: int, classes: int, dtype: torch.dtype) -> torch.Tensor:
    targets = torch.zeros(rows, classes)
    targets[torch.arange(rows), torch.randint(0, classes, (rows,))] = (torch.rand(rows) < 0.5).float()
    return targets.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_a_focal_loss_is_its_reductions_kernels_alone(dtype, run_hybrid):
    def inputs(rows):
        return ((torch.randn(rows, 20) * 2 - 4).to(dtype), one_hot_targets(rows, 20, dtype))

    program, actual, expected = run_hybrid(FocalLoss(), inputs(16), inputs(37))
    lines = program.schedule.splitlines()
    assert [line.split()[1] for line in lines] == ["reduce", "reduce"], program.schedule
    assert "binary_cross_entropy_with_logits" in next(line for line in lines if "sum_1" in line)
    assert "aten.binary_cross_entropy_with_logits.default" in program.replaced_ops and program.kept_ops == ()
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["float32", "float16", "bfloat16"])
def test_several_losses_in_one_kernel_keep_their_own_locals(dtype, run_hybrid):
    def inputs(rows):
        return (torch.randn(rows, 24).to(dtype), torch.randn(rows, 24).to(dtype), (torch.rand(1, 24) > 0.3).to(dtype))

    program, actual, expected = run_hybrid(MaskedRegression(), inputs(4), inputs(9))
    (line,) = program.schedule.splitlines()
    members = line.split()[2].split(",")
    assert line.startswith("kernel reduce ") and program.kept_ops == ()
    assert {"mse_loss", "smooth_l1_loss", "huber_loss", "mean"} <= set(members)
    tolerance = 1e-5 if dtype == torch.float32 else 1e-2
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_weighted_logits_read_their_broadcast_weights(dtype, run_hybrid):
    model = WeightedLogits(12).to(dtype)

    def inputs(rows):
        return (torch.randn(rows, 12).to(dtype), torch.rand(rows, 12).to(dtype))

    program, actual, expected = run_hybrid(model, inputs(5), inputs(11))
    (line,) = program.schedule.splitlines()
    assert line.startswith("kernel reduce ") and "binary_cross_entropy_with_logits" in line and program.kept_ops == ()
    tolerance = 1e-5 if dtype == torch.float32 else 2e-2
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance)


def test_a_loss_between_different_dtypes_stays_in_pytorch(run_hybrid):
    class Mixed(nn.Module):
        def forward(self, prediction, target):
            return F.mse_loss(prediction, target, reduction="none") * 2

    def inputs(rows):
        return (torch.randn(rows, 6), torch.randn(rows, 6).half())

    program, actual, expected = run_hybrid(Mixed(), inputs(4), inputs(9))
    assert program.kept_ops == ("aten.mse_loss.default",)  # PyTorch promotes; the loss formulas do not
    torch.testing.assert_close(actual, expected)
