"""Synthetic program (CSP-DAG level 1, seed 3573230598996991585, bfloat16): softplus."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = F.softplus(x, beta=1.0)
        return h1


def get_inputs():
    x = torch.randn(20, 29, 11, 19, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
