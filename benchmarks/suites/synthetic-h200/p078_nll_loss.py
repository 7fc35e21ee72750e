"""Synthetic program (CSP-DAG level 1, seed 3734478691038672253, bfloat16): nll_loss."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, target):
        h1 = F.nll_loss(F.log_softmax(x, dim=1), target)
        return h1


def get_inputs():
    x = torch.randn(150, 5, dtype=torch.bfloat16)
    target = torch.randint(0, 5, (150,))
    return [x, target]


def get_init_inputs():
    return []
