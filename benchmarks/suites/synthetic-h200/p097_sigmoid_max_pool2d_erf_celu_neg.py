"""Synthetic program (CSP-DAG level 5, seed 3496441803248130420): sigmoid -> max_pool2d -> erf -> celu -> neg."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = torch.sigmoid(x)
        h2 = F.max_pool2d(y, kernel_size=3, stride=2, padding=1)
        h3 = torch.erf(h1)
        h4 = F.celu(h2, alpha=0.5)
        h5 = torch.neg(h3)
        return h4, h5


def get_inputs():
    x = torch.randn(1)
    y = torch.randn(8, 3, 8, 9)
    return [x, y]


def get_init_inputs():
    return []
