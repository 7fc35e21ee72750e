"""Log-probabilities picked at targets (`log_softmax(x, -1).gather(-1, t[:, None])`) computed as a per-row
cross-entropy: one pass over the logits, nothing written per class.

Each model is captured at one size and run at another, on the GPU or under Triton's interpreter, against PyTorch.
"""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from schedule_helpers import capture, compile_with

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter computes masked-off lanes too


class TokenNLL(nn.Module):
    """A training loop's masked token NLL: padding targets made safe, log-probabilities picked, averaged."""

    def forward(self, logits, targets):
        mask = targets != -1
        safe_targets = targets.masked_fill(~mask, 0)
        picked = F.log_softmax(logits, dim=-1).gather(dim=-1, index=safe_targets.unsqueeze(-1)).squeeze(-1)
        return -(picked * mask).sum() / mask.sum()


class PerTokenLogProbs(nn.Module):
    """RL code's per-token log-probabilities of the sampled tokens, from low-precision logits."""

    def forward(self, logits, tokens):
        return torch.gather(F.log_softmax(logits.float(), dim=1), 1, tokens[:, None]).squeeze(1)


class IndexGiven(nn.Module):
    def forward(self, logits, index):
        return F.log_softmax(logits, -1).gather(1, index) * 2.0


def targets(rows, classes, padding=0.2):
    values = torch.randint(0, classes, (rows,))
    values[torch.rand(rows) < padding] = -1
    return values


def run(load_program, device, model, example, test, *, tolerance=1e-5):
    model = model.eval().to(device)
    graph = capture(model, tuple(value.to(device) for value in example))
    program = compile_with(graph)
    inputs = tuple(value.to(device) for value in test)
    with torch.no_grad():
        expected = model(*inputs)
        actual = getattr(load_program(program), program.forward_function)(model, *inputs)
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance)
    return graph, program


def test_a_masked_token_nll_picks_its_log_probabilities_in_one_loss_kernel(load_program, device):
    graph, program = run(
        load_program, device, TokenNLL(), (torch.randn(16, 12), targets(16, 12)), (torch.randn(9, 30), targets(9, 30))
    )
    ops = [node.op for node in graph.nodes]
    assert "aten.log_softmax.int" not in ops and "aten.gather.default" not in ops
    assert re.search(r"^kernel loss cross_entropy_loss,neg\w* ", program.schedule, re.MULTILINE)
    assert "aten.gather.default" not in program.kept_ops


def test_low_precision_log_probabilities_of_another_row_count_read_those_rows(load_program, device):
    example = (torch.randn(6, 10).bfloat16(), torch.randint(0, 10, (6,)))
    test = (torch.randn(7, 11).bfloat16(), torch.randint(0, 11, (5,)))
    graph, _ = run(load_program, device, PerTokenLogProbs(), example, test)
    assert "aten.cross_entropy_loss.default" in [node.op for node in graph.nodes]


def test_an_index_of_one_column_made_elsewhere_is_squeezed_to_the_targets(load_program, device):
    example = (torch.randn(5, 8), torch.randint(0, 8, (5, 1)))
    graph, program = run(load_program, device, IndexGiven(), example, (torch.randn(4, 6), torch.randint(0, 6, (4, 1))))
    assert "aten.cross_entropy_loss.default" in program.replaced_ops


def picked_and_summed(log_probabilities, index):
    return log_probabilities.gather(1, index), log_probabilities.sum()


@pytest.mark.parametrize(
    "forward",
    [
        lambda logits, index: picked_and_summed(F.log_softmax(logits, -1), index[:, :1]),
        lambda logits, index: F.log_softmax(logits, -1).gather(1, index),  # two classes a row
        lambda logits, index: F.log_softmax(logits, 0).gather(0, index[:1].T.contiguous().T[:, :1].T),  # over rows
        lambda logits, index: F.log_softmax(logits, -1, dtype=torch.float64).gather(1, index[:, :1]),  # a cast
    ],
    ids=["read-elsewhere", "two-classes", "over-rows", "cast-first"],
)
def test_picks_that_are_not_one_class_a_row_of_a_log_softmax_only_they_read_stay_as_written(
    forward, load_program, device
):
    class Model(nn.Module):
        def forward(self, logits, index):
            return forward(logits, index)

    example = (torch.randn(5, 8), torch.randint(0, 5, (5, 2)))
    graph, _ = run(load_program, device, Model(), example, example)
    assert "aten.cross_entropy_loss.default" not in [node.op for node in graph.nodes]


class ShiftedTokenLogProbs(nn.Module):
    """A language model's per-token log-probabilities of the next tokens, as RL code computes them."""

    def forward(self, logits, tokens):
        shifted = F.log_softmax(logits[:, :-1].float(), dim=-1)
        return shifted.gather(-1, tokens[:, 1:].unsqueeze(-1)).squeeze(-1)


def test_per_token_log_probabilities_of_a_sequence_are_one_loss_pass(load_program, device):
    example = (torch.randn(2, 6, 10).bfloat16(), torch.randint(0, 10, (2, 6)))
    test = (torch.randn(3, 8, 12).bfloat16(), torch.randint(0, 12, (3, 8)))
    graph, program = run(load_program, device, ShiftedTokenLogProbs(), example, test)
    ops = [node.op for node in graph.nodes]
    assert "aten.cross_entropy_loss.default" in ops and "aten.gather.default" not in ops
    # the cast to float32 moved after the slices and the classes' move, so the loss kernel casts as it reads
    assert program.schedule.startswith("kernel loss to") and program.kept_ops == ()
