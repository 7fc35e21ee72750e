"""Synthetic program (CSP-DAG level 5, seed 1525256537917275241, float16): huber_loss -> rsqrt -> cat -> stack -> rsqrt."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        h1 = F.huber_loss(x, x, delta=2.0)
        h2 = torch.rsqrt(torch.abs(h1) + 1e-6)
        h3 = torch.cat([y, y], dim=1)
        h4 = torch.stack([h2, z], dim=0)
        h5 = torch.rsqrt(torch.abs(h3) + 1e-6)
        return h4, h5


def get_inputs():
    x = torch.randn(1, dtype=torch.float16)
    y = torch.randn(1, 46, 32, 11, dtype=torch.float16)
    z = torch.randn((), dtype=torch.float16)
    return [x, y, z]


def get_init_inputs():
    return []
