"""Synthetic program (CSP-DAG level 5, seed 2891780436936369840, bfloat16): rsqrt -> celu -> cat -> hardsigmoid -> mse_loss."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = torch.rsqrt(torch.abs(x) + 1e-6)
        h2 = F.celu(h1, alpha=1.0)
        h3 = torch.cat([h2, x], dim=1)
        h4 = F.hardsigmoid(h3)
        h5 = F.mse_loss(h4, y)
        return h5


def get_inputs():
    x = torch.randn(2, 51, dtype=torch.bfloat16)
    y = torch.randn(2, 102, dtype=torch.bfloat16)
    return [x, y]


def get_init_inputs():
    return []
