"""Synthetic program (CSP-DAG level 3, seed 769150666292023765, bfloat16): l1_loss -> cat -> repeat."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = F.l1_loss(x, x)
        h2 = torch.cat([x, x], dim=0)
        h3 = h2.repeat(2, 1, 2)
        return h1, h3


def get_inputs():
    x = torch.randn(21, 165, 67, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
