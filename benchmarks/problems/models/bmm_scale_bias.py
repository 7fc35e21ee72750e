"""GEMM: a batched matmul with a scale and an added per-batch bias tensor (the shape of relative-position attention
logits), torch.bmm(x, y) * scale + bias, 32 x 1024 x 1024 x 1024 in bfloat16 (67 MB per operand; 201 MB in,
67 MB out).

69 GFLOP on tensor cores; the scale and bias add are the epilogue eager runs as two more passes.
"""

import torch
import torch.nn as nn

CATEGORY = "gemm"

BATCH = 32
M = 1024
K = 1024
N = 1024


class Model(nn.Module):
    def __init__(self, scale):
        super().__init__()
        self.scale = scale

    def forward(self, x, y, bias):
        out = torch.bmm(x, y)
        return out * self.scale + bias


def get_inputs():
    return [
        torch.randn(BATCH, M, K, dtype=torch.bfloat16),
        torch.randn(BATCH, K, N, dtype=torch.bfloat16),
        torch.randn(BATCH, M, N, dtype=torch.bfloat16),
    ]


def get_init_inputs():
    return [K**-0.5]
