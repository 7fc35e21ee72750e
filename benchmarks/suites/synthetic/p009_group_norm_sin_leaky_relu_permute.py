"""Synthetic program (CSP-DAG level 4, seed 4428922557462447275): group_norm -> sin -> leaky_relu -> permute."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.group_norm1 = nn.GroupNorm(1, 5)

    def forward(self, x):
        h1 = self.group_norm1(x)
        h2 = torch.sin(h1)
        h3 = F.leaky_relu(h2, negative_slope=0.01)
        h4 = h3.permute(3, 0, 1, 2)
        return h4


def get_inputs():
    x = torch.randn(3, 5, 1, 1)
    return [x]


def get_init_inputs():
    return []
