"""Fusion: Euclidean distance between paired embeddings, sqrt(sum((x - y)^2, dim=-1)), for 8192 pairs of
2048-float32 vectors (64 MB per input): a reduction of an elementwise chain.

Eager materialises the difference and its square (two 64 MB tensors) before reducing.
"""

import torch
import torch.nn as nn

CATEGORY = "fusion"

PAIRS = 8192
DIM = 2048


class Model(nn.Module):
    def forward(self, x, y):
        return torch.sqrt(torch.sum((x - y) ** 2, dim=-1))


def get_inputs():
    return [torch.randn(PAIRS, DIM), torch.randn(PAIRS, DIM)]


def get_init_inputs():
    return []
