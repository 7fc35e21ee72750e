"""Synthetic program (CSP-DAG level 4, seed 1612164012280426194, float16): cross_entropy -> reciprocal -> linear -> cos."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(2, 9, bias=False)
        self.to(torch.float16)

    def forward(self, x, target):
        h1 = F.cross_entropy(x, target)
        h2 = 1.0 / (torch.abs(h1) + 1.0)
        h3 = self.linear1(x)
        h4 = torch.cos(h1)
        return h2, h3, h4


def get_inputs():
    x = torch.randn(141, 2, dtype=torch.float16)
    target = torch.randint(0, 2, (141,))
    return [x, target]


def get_init_inputs():
    return []
