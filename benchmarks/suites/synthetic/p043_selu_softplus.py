"""Synthetic program (CSP-DAG level 2, seed 7350941465447661141): selu -> softplus."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = F.selu(x)
        h2 = F.softplus(h1, beta=1.0)
        return h2


def get_inputs():
    x = torch.randn(31, 3, 5)
    return [x]


def get_init_inputs():
    return []
