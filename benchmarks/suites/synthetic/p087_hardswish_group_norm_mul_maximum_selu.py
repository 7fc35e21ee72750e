"""Synthetic program (CSP-DAG level 5, seed 7491530423827693193, bfloat16): hardswish -> group_norm -> mul -> maximum -> selu."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.group_norm1 = nn.GroupNorm(1, 1)
        self.to(torch.bfloat16)

    def forward(self, x, y):
        h1 = F.hardswish(x)
        h2 = self.group_norm1(y)
        h3 = h2 * h1
        h4 = torch.maximum(h3, h2)
        h5 = F.selu(h4)
        return h5


def get_inputs():
    x = torch.randn((), dtype=torch.bfloat16)
    y = torch.randn(7, 1, 16, 3, dtype=torch.bfloat16)
    return [x, y]


def get_init_inputs():
    return []
