"""Synthetic program (CSP-DAG level 6, seed 4890647748866548511): adaptive_avg_pool2d -> transpose -> unsqueeze -> where -> where -> minimum."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        h1 = F.adaptive_avg_pool2d(x, 1)
        h2 = h1.transpose(2, 3)
        h3 = y.unsqueeze(2)
        h4 = torch.where(h2 > 0, h2, h1)
        h5 = torch.where(h2 > 0, h2, z)
        h6 = torch.minimum(h3, h3)
        return h4, h5, h6


def get_inputs():
    x = torch.randn(5, 4, 6, 2)
    y = torch.randn(6, 71)
    z = torch.randn(())
    return [x, y, z]


def get_init_inputs():
    return []
