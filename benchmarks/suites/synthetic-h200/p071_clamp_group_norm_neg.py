"""Synthetic program (CSP-DAG level 3, seed 6966697446507381551): clamp -> group_norm -> neg."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.group_norm1 = nn.GroupNorm(1, 9)

    def forward(self, x):
        h1 = torch.clamp(x, min=-0.5, max=2.0)
        h2 = self.group_norm1(h1)
        h3 = torch.neg(h2)
        return h3


def get_inputs():
    x = torch.randn(1, 9, 59, 6)
    return [x]


def get_init_inputs():
    return []
