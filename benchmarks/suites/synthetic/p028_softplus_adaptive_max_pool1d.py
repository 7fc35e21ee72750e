"""Synthetic program (CSP-DAG level 2, seed 7789788193392886806): softplus -> adaptive_max_pool1d."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = F.softplus(x, beta=2.0)
        h2 = F.adaptive_max_pool1d(y, 4)
        return h1, h2


def get_inputs():
    x = torch.randn(1)
    y = torch.randn(16, 3, 6)
    return [x, y]


def get_init_inputs():
    return []
