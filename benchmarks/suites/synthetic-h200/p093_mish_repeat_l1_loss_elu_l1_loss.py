"""Synthetic program (CSP-DAG level 5, seed 5047444975475257298, bfloat16): mish -> repeat -> l1_loss -> elu -> l1_loss."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        h1 = F.mish(x)
        h2 = y.repeat(2, 2, 2)
        h3 = F.l1_loss(h1, z)
        h4 = F.elu(h2, alpha=0.5)
        h5 = F.l1_loss(h4, h4)
        return h3, h5


def get_inputs():
    x = torch.randn(26, 3, 32, 11, dtype=torch.bfloat16)
    y = torch.randn(44, 77, 24, dtype=torch.bfloat16)
    z = torch.randn(26, 3, 32, 11, dtype=torch.bfloat16)
    return [x, y, z]


def get_init_inputs():
    return []
