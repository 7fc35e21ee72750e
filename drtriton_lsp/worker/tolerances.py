"""Tolerances by dtype: what "matches the reference" means, stated in every report.

KernelBench's convention: fp32 atol = rtol = 1e-4; half precision 1e-2; integers exact.
A float32 result computed with TF32 tensor cores (only when a schedule asks for it) gets 1e-2.
Under Triton's CPU interpreter (3.7) float32 -> bfloat16 conversion truncates instead of rounding to
nearest as GPUs do, one bfloat16 step per rounding; bfloat16 results there get 1.6e-2.
"""

from __future__ import annotations

import torch

TOLERANCES: dict[torch.dtype, dict[str, float]] = {
    torch.float64: {"atol": 1e-7, "rtol": 1e-7},
    torch.float32: {"atol": 1e-4, "rtol": 1e-4},
    torch.float16: {"atol": 1e-2, "rtol": 1e-2},
    torch.bfloat16: {"atol": 1e-2, "rtol": 1e-2},
}
EXACT = {"atol": 0.0, "rtol": 0.0}
TF32 = {"atol": 1e-2, "rtol": 1e-2}
INTERPRETED_BFLOAT16 = {"atol": 1.6e-2, "rtol": 1.6e-2}


def tolerance_for(dtype: torch.dtype, *, tf32: bool = False, interpreter: bool = False) -> dict[str, float]:
    if tf32 and dtype == torch.float32:
        return dict(TF32)
    if interpreter and dtype == torch.bfloat16:
        return dict(INTERPRETED_BFLOAT16)
    return dict(TOLERANCES.get(dtype, EXACT))
