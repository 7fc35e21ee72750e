"""Synthetic program (CSP-DAG level 4, seed 2066719843266964453, bfloat16): flatten -> l1_loss -> cat -> sqrt."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = torch.flatten(x, 1)
        h2 = F.l1_loss(h1, h1)
        h3 = torch.cat([x, x], dim=2)
        h4 = torch.sqrt(torch.abs(h2))
        return h3, h4


def get_inputs():
    x = torch.randn(231, 35, 10, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
