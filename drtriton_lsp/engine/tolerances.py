"""Tolerances by dtype: what "matches the reference" means, stated in every report.

KernelBench's convention: fp32 atol = rtol = 1e-4; half precision 1e-2; integers exact.
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


def tolerance_for(dtype: torch.dtype) -> dict[str, float]:
    return dict(TOLERANCES.get(dtype, EXACT))
