"""What the judge makes of the candidate's answers and of its own inputs, piece by piece: an answer with any field of
the wrong type is a protocol violation; the strided trial's layouts hold the same values in another layout for every
input with more than one element; the arbiter never rescues an output when the float64 run itself is not finite;
draws made ahead in a thread are the draws the judge would have made, and a draw that fails there fails where it is
taken; another process's tally adds up.
"""

from __future__ import annotations

import pytest
import torch

import threading

from drtriton_lsp.worker.judge import (
    DrawsAhead,
    Rejected,
    Tally,
    _checked_call_answer,
    _compare,
    _non_contiguous,
)
from drtriton_lsp.worker.tensor_exchange import flat_values

ANSWER = {
    "outputs": [{"kind": "tensor"}], "launches": 2, "kernels": {"k": 2}, "torch_ops": {},
    "outputs_hold_triton_values": [True], "outputs_computed_here": [True], "broken_guards": [], "modified_inputs": [],
    "seconds": 0.5, "graph_replays": 0,
}


def test_a_well_formed_answer_is_taken_and_its_guard_descriptions_are_cut_short():
    answer = _checked_call_answer({**ANSWER, "broken_guards": ["x" * 500]})
    assert answer["launches"] == 2 and answer["broken_guards"] == ["x" * 200]


@pytest.mark.parametrize(
    ("change", "detail"),
    [
        ({"launches": "2"}, "its answer's 'launches' is not a int"),
        ({"launches": True}, "its answer's 'launches' is not a int"),  # a bool is not a count
        ({"seconds": None}, "its answer's 'seconds' is not a number"),
        ({"outputs": {}}, "its answer's 'outputs' is not a list"),
        ({"kernels": {"k": 2.0}}, "its launch or op counts are not counts"),
        ({"torch_ops": {1: 1}}, "its launch or op counts are not counts"),
        ({"outputs": [{"kind": "verdict"}]}, "an output it described in an unknown way"),
        ({"outputs": ["tensor"]}, "an output it described in an unknown way"),
        ({"outputs_hold_triton_values": [1]}, "its audit flags are not booleans"),
        ({"graph_replays": None}, "its answer's 'graph_replays' is not a int"),
    ],
)
def test_an_answer_with_a_field_of_the_wrong_type_is_a_protocol_violation(change, detail):
    with pytest.raises(Rejected) as raised:
        _checked_call_answer({**ANSWER, **change})
    assert (raised.value.reason, raised.value.detail) == ("protocol_violation", detail)


def test_an_output_that_is_not_a_plain_tensor_is_a_wrong_result():
    with pytest.raises(Rejected) as raised:
        _checked_call_answer({**ANSWER, "outputs": [{"kind": "unsupported", "type": "LazyTensor"}]})
    expected = ("wrong_result", "the forward returned LazyTensor, not a plain tensor")
    assert (raised.value.reason, raised.value.detail) == expected


@pytest.mark.parametrize("shape", [(2,), (5,), (3, 1), (1, 4), (2, 3), (2, 3, 4)])
def test_every_input_of_more_than_one_element_gets_another_layout_with_the_same_values(shape):
    value = torch.arange(torch.Size(shape).numel(), dtype=torch.float32).reshape(shape)
    laid_out = _non_contiguous(value)
    assert not laid_out.is_contiguous() and laid_out.shape == value.shape
    assert torch.equal(laid_out, value)


@pytest.mark.parametrize("shape", [(2, 3), (4, 2, 3)])
def test_a_matrix_input_is_given_with_its_last_two_dims_transposed_in_memory(shape):
    laid_out = _non_contiguous(torch.zeros(shape))
    assert laid_out.stride()[-2] == 1 and laid_out.stride()[-1] == shape[-2]  # column-major: row-major indexing fails


def test_a_single_value_keeps_its_layout():
    assert _non_contiguous(torch.tensor(3.0)).is_contiguous() and _non_contiguous(torch.ones(1)).is_contiguous()


def test_an_output_outside_tolerance_is_not_rescued_when_the_float64_run_is_not_finite():
    exact = torch.linspace(-3.0, 3.0, 100, dtype=torch.float64)
    exact[0] = float("inf")  # the float64 run overflowed where eager did not
    eager = exact.clone().float()
    eager[0] = 1.0
    candidate = eager + 5e-3
    with pytest.raises(Rejected) as raised:
        _compare([eager], [candidate], Tally(), "primary", lambda: [exact])
    assert "candidate max error inf" in raised.value.detail


def seeded_draw(offset: int) -> list[torch.Tensor]:
    torch.manual_seed(offset)
    return [torch.randn(3, 4)]


def test_a_draw_made_while_waiting_is_made_in_another_thread_and_equals_the_direct_draw():
    threads: list[str] = []

    def draw(offset: int) -> list[torch.Tensor]:
        threads.append(threading.current_thread().name)
        return seeded_draw(offset)

    draws = DrawsAhead(draw, [1, 2, 3, 4])
    with draws.while_waiting():
        pass
    assert threads == ["draws [1]"]
    with draws.while_waiting(count=2):  # two draws in one wait, in the planned order
        pass
    assert threads == ["draws [1]", "draws [2, 3]", "draws [2, 3]"]
    for offset in (1, 2, 3):
        assert torch.equal(draws.take(offset)[0], seeded_draw(offset)[0])
    assert torch.equal(draws.take(4)[0], seeded_draw(4)[0]) and threads[-1] == threading.current_thread().name
    assert torch.equal(draws.take(7)[0], seeded_draw(7)[0])  # an unplanned draw is made on the spot


def test_a_draw_that_fails_in_the_thread_raises_where_it_is_taken():
    calls: list[int] = []

    def failing(offset: int) -> list[torch.Tensor]:
        calls.append(offset)
        raise ValueError("get_inputs() failed")

    draws = DrawsAhead(failing, [5])
    with draws.while_waiting():
        pass
    with pytest.raises(ValueError, match="get_inputs"):
        draws.take(5)
    assert calls == [5, 5]


def test_another_processs_tally_adds_up():
    first, second = Tally(trials=5, passed=5, max_abs_err=1e-6, launches=10, kernels={"k": 10}), Tally(
        trials=3, passed=3, max_abs_err=2e-6, launches=6, kernels={"k": 4, "j": 2}, shapes=[{"label": "odd"}],
    )
    first.merge(second)
    assert (first.trials, first.passed, first.max_abs_err, first.launches) == (8, 8, 2e-6, 16)
    assert first.kernels == {"k": 14, "j": 2} and first.shapes == [{"label": "odd"}]


def test_a_tensor_whose_last_dim_is_one_is_still_laid_out_another_way():
    # transposing a last dim of size 1 changes no stride that counts: every other element is used instead
    value = torch.randn(4, 5, 1)
    strided = _non_contiguous(value)
    assert not strided.is_contiguous() and torch.equal(strided, value)


def test_nested_outputs_are_flattened_in_order():
    a, b, c = torch.zeros(1), torch.ones(1), torch.full((1,), 2.0)
    assert flat_values((a, [b, (c, 3)])) == [a, b, c, 3] and flat_values(a) == [a]
