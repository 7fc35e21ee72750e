"""Synthetic program (CSP-DAG level 2, seed 1490221331701982673): celu -> mm."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = F.celu(x, alpha=0.5)
        h2 = torch.mm(y, y)
        return h1, h2


def get_inputs():
    x = torch.randn(3, 5, 6, 18)
    y = torch.randn(29, 29)
    return [x, y]


def get_init_inputs():
    return []
