"""What "matches the reference" means for each dtype, as the judge applies it: every tolerance docs/verification.md
states is pinned from both sides (an error just inside passes, one a few times outside is rejected with the tolerance
named).
"""

from __future__ import annotations

import pytest
import torch

from drtriton_lsp.worker.judge import Rejected, Tally, _compare

# (dtype, tally flags, atol = rtol as the table in docs/verification.md states them, the label the report shows)
STATED = [
    (torch.float64, {}, 1e-7, "float64"),
    (torch.float32, {}, 1e-4, "float32"),
    (torch.float16, {}, 1e-2, "float16"),
    (torch.bfloat16, {}, 1e-2, "bfloat16"),
    (torch.float32, {"tf32": True}, 1e-2, "float32 (tf32)"),
    (torch.bfloat16, {"interpreter": True}, 1.6e-2, "bfloat16 (interpreter)"),
]


def judged(want: torch.Tensor, got: torch.Tensor, **flags) -> Tally:
    tally = Tally(**flags)
    _compare([want], [got], tally, "primary")  # no float64 run: the tolerance alone decides
    return tally


@pytest.mark.parametrize(("dtype", "flags", "tolerance", "label"), STATED)
def test_an_absolute_error_inside_atol_passes_and_the_report_states_the_tolerance(dtype, flags, tolerance, label):
    zeros = torch.zeros(64, dtype=dtype)
    tally = judged(zeros, torch.full_like(zeros, 0.6 * tolerance), **flags)
    assert tally.tolerance == {label: {"atol": tolerance, "rtol": tolerance}}


@pytest.mark.parametrize(("dtype", "flags", "tolerance", "label"), STATED)
def test_an_absolute_error_three_times_atol_is_rejected_naming_the_tolerance(dtype, flags, tolerance, label):
    zeros = torch.zeros(64, dtype=dtype)
    with pytest.raises(Rejected) as raised:
        judged(zeros, torch.full_like(zeros, 3 * tolerance), **flags)
    assert raised.value.reason == "wrong_result"
    expected = f"output 0 ({label}): 64 of 64 elements outside atol={tolerance:g}, rtol={tolerance:g}"
    assert expected in raised.value.detail


@pytest.mark.parametrize(("dtype", "flags", "tolerance", "label"), STATED)
def test_the_relative_part_scales_with_the_reference(dtype, flags, tolerance, label):
    # at |reference| = 64 the bound is atol + 64 * rtol: an error of half of it passes, twice it does not
    # (64 and these offsets are exact in every dtype here)
    reference = torch.full((8,), 64.0, dtype=dtype)
    bound = tolerance + 64 * tolerance
    judged(reference, reference + _exact_offset(dtype, 0.5 * bound), **flags)
    with pytest.raises(Rejected):
        judged(reference, reference + _exact_offset(dtype, 2 * bound), **flags)


def _exact_offset(dtype: torch.dtype, offset: float) -> float:
    """The largest offset at most `offset` that 64 + offset represents exactly in `dtype` (its step at 64)."""
    step = 64 * torch.finfo(dtype).eps
    return max(step, (offset // step) * step)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.bool])
def test_integer_and_boolean_results_must_be_exact(dtype):
    want = torch.zeros(16, dtype=dtype)
    got = want.clone()
    got[3] = 1
    with pytest.raises(Rejected) as raised:
        judged(want, got)
    assert "1 of 16 elements outside atol=0, rtol=0" in raised.value.detail
    assert judged(want, want.clone()).max_abs_err == 0.0  # an exact match reports no error
