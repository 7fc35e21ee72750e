"""Fusion: a 4096 -> 4096 projection, a separate bias add and ReLU, on 4096 tokens in float32.

The matrix product dominates (137 GFLOP at fp32 accuracy, no TF32); fusing the bias and ReLU into its epilogue
saves two passes over the 64 MB output.
"""

import torch
import torch.nn as nn

CATEGORY = "fusion"

TOKENS = 4096
HIDDEN = 4096


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(hidden, hidden) / hidden**0.5)
        self.bias = nn.Parameter(torch.randn(hidden) * 0.1)

    def forward(self, x):
        return torch.relu(nn.functional.linear(x, self.weight) + self.bias)


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
