"""Synthetic program (CSP-DAG level 5, seed 4575020839649819295): clamp -> abs -> adaptive_avg_pool1d -> logsigmoid -> matmul."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        h1 = torch.clamp(x, min=0.0, max=2.0)
        h2 = torch.abs(h1)
        h3 = F.adaptive_avg_pool1d(y, 2)
        h4 = F.logsigmoid(h2)
        h5 = h3 @ z
        return h4, h5


def get_inputs():
    x = torch.randn(())
    y = torch.randn(56, 2, 47)
    z = torch.randn(1, 2, 20)
    return [x, y, z]


def get_init_inputs():
    return []
