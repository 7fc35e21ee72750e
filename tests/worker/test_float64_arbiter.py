"""The float64 arbiter: an output outside the dtype tolerance of eager PyTorch passes only when,
against a float64 run of the reference, it is no less accurate than eager itself.
"""

from __future__ import annotations

import pytest
import torch

from drtriton_lsp.worker.judge import Call, Rejected, Tally, _compare, _float64_outputs

EXACT = torch.linspace(-3.0, 3.0, 1000, dtype=torch.float64)
EAGER = (EXACT + 1e-3 * torch.sin(EXACT * 37)).float()  # eager's own error: up to 1e-3


def test_an_output_more_accurate_than_eager_passes_and_is_recorded():
    candidate = (EXACT + 4e-4 * torch.cos(EXACT * 11)).float()
    tally = Tally()
    _compare([EAGER], [candidate], tally, "primary", lambda: [EXACT])
    assert len(tally.arbitrated) == 1
    assert "against float64: candidate max error 0.0004, eager 0.001" in tally.arbitrated[0]


def test_an_output_less_accurate_than_eager_is_rejected_with_both_errors():
    candidate = (EXACT + 5e-3).float()
    with pytest.raises(Rejected) as raised:
        _compare([EAGER], [candidate], Tally(), "primary", lambda: [EXACT])
    assert raised.value.reason == "wrong_result"
    assert "candidate max error 0.005" in raised.value.detail and "eager 0.001" in raised.value.detail


def test_without_a_float64_reference_the_tolerance_alone_decides():
    candidate = (EXACT + 4e-4 * torch.cos(EXACT * 11)).float()
    with pytest.raises(Rejected):
        _compare([EAGER], [candidate], Tally(), "primary", lambda: None)
    with pytest.raises(Rejected):
        _compare([EAGER], [candidate], Tally(), "primary")


def test_a_non_finite_candidate_is_never_arbitrated_into_a_pass():
    candidate = EAGER.clone()
    candidate[10] = float("nan")
    with pytest.raises(Rejected):
        _compare([EAGER], [candidate], Tally(), "primary", lambda: [EXACT])


def test_an_output_up_to_twice_as_far_from_float64_as_eager_passes_and_beyond_it_does_not():
    # eager's own error is 1e-3 (EAGER above); the arbiter allows twice that, plus the dtype's atol (1e-4)
    inside = (EXACT + 1.9e-3).float()
    tally = Tally()
    _compare([EAGER], [inside], tally, "primary", lambda: [EXACT])
    assert len(tally.arbitrated) == 1
    with pytest.raises(Rejected):
        _compare([EAGER], [(EXACT + 2.3e-3).float()], Tally(), "primary", lambda: [EXACT])


class _Noisy(torch.nn.Module):
    def forward(self, x):
        return torch.sigmoid(x) * 2.0 + torch.rand_like(x)


class _Smooth(torch.nn.Module):
    def forward(self, x):
        return torch.sigmoid(x) * 2.0


def test_a_reference_that_draws_random_numbers_gets_no_float64_arbiter():
    # eager's own "error" against a float64 run would be the spread of its random draws (up to 1 here): any candidate
    # within twice that would pass. Without an arbiter the dtype's tolerance decides, and it rejects.
    x = torch.randn(64, 32)
    assert _float64_outputs(_Noisy().double(), Call([x]), torch.device("cpu")) is None
    eager = _Noisy()(x)
    candidate = torch.sigmoid(x) * 2.0 + torch.rand_like(x)
    with pytest.raises(Rejected):
        _compare([eager], [candidate], Tally(), "primary",
                 lambda: _float64_outputs(_Noisy().double(), Call([x]), torch.device("cpu")))
    state = torch.get_rng_state()
    smooth = _float64_outputs(_Smooth().double(), Call([x]), torch.device("cpu"))
    assert smooth is not None and torch.equal(smooth[0], torch.sigmoid(x.double()) * 2.0)
    assert torch.equal(torch.get_rng_state(), state)  # the reference's own draws are left as they were
