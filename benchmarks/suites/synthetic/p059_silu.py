"""Synthetic program (CSP-DAG level 1, seed 1008695230498904512): silu."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = F.silu(x)
        return h1


def get_inputs():
    x = torch.randn(247, 3)
    return [x]


def get_init_inputs():
    return []
