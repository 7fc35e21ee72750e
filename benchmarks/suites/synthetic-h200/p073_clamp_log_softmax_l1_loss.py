"""Synthetic program (CSP-DAG level 3, seed 2506576001501726049, bfloat16): clamp -> log_softmax -> l1_loss."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = torch.clamp(x, min=0.0, max=2.0)
        h2 = torch.log_softmax(y, dim=0)
        h3 = F.l1_loss(h1, x)
        return h2, h3


def get_inputs():
    x = torch.randn(2, 183, 22, dtype=torch.bfloat16)
    y = torch.randn(27, 156, dtype=torch.bfloat16)
    return [x, y]


def get_init_inputs():
    return []
