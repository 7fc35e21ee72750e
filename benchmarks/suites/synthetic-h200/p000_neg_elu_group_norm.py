"""Synthetic program (CSP-DAG level 3, seed 8135440855366430074, float16): neg -> elu -> group_norm."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.group_norm1 = nn.GroupNorm(1, 2)
        self.to(torch.float16)

    def forward(self, x, y):
        h1 = torch.neg(x)
        h2 = F.elu(x, alpha=1.0)
        h3 = self.group_norm1(y)
        return h1, h2, h3


def get_inputs():
    x = torch.randn(1, dtype=torch.float16)
    y = torch.randn(223, 2, 36, dtype=torch.float16)
    return [x, y]


def get_init_inputs():
    return []
