"""Synthetic program (CSP-DAG level 4, seed 9015222285550834127, float16): sin -> soft_margin_loss -> nll_loss -> softmax."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z, target):
        h1 = torch.sin(x)
        h2 = F.soft_margin_loss(y, torch.sign(y).detach())
        h3 = F.nll_loss(F.log_softmax(z, dim=1), target)
        h4 = torch.softmax(y, dim=-1)
        return h1, h2, h3, h4


def get_inputs():
    x = torch.randn((), dtype=torch.float16)
    y = torch.randn(1, dtype=torch.float16)
    z = torch.randn(759, 118, dtype=torch.float16)
    target = torch.randint(0, 118, (759,))
    return [x, y, z, target]


def get_init_inputs():
    return []
