"""Synthetic program (CSP-DAG level 4, seed 3046293233455400054, bfloat16): maximum -> mm -> relu -> sub."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = torch.maximum(x, x)
        h2 = torch.mm(y, y)
        h3 = torch.relu(h2)
        h4 = h1 - h2
        return h3, h4


def get_inputs():
    x = torch.randn(4165, dtype=torch.bfloat16)
    y = torch.randn(1, 1, dtype=torch.bfloat16)
    return [x, y]


def get_init_inputs():
    return []
