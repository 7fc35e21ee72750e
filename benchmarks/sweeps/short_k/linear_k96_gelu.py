"""Sweep problem (benchmarks/sweeps/short_k): a bfloat16 linear layer K=96 -> 4K (gelu) on 262144 rows, for the
matmul template's short-K tiles.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "gemm"


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(96, 4 * 96, dtype=torch.bfloat16)

    def forward(self, x):
        return F.gelu(self.fc(x))


def get_inputs():
    return [torch.randn(262144, 96, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
