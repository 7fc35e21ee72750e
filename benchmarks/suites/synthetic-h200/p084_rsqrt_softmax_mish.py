"""Synthetic program (CSP-DAG level 3, seed 942008038617739639): rsqrt -> softmax -> mish."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = torch.rsqrt(torch.abs(x) + 1e-6)
        h2 = torch.softmax(h1, dim=2)
        h3 = F.mish(h2)
        return h3


def get_inputs():
    x = torch.randn(1, 5, 33, 1)
    return [x]


def get_init_inputs():
    return []
