"""Synthetic program (CSP-DAG level 2, seed 2475661733853518116): elu -> tanh."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = F.elu(x, alpha=1.0)
        h2 = torch.tanh(h1)
        return h2


def get_inputs():
    x = torch.randn(4, 14, 179)
    return [x]


def get_init_inputs():
    return []
