"""Synthetic program (CSP-DAG level 2, seed 3297690216596760708): soft_margin_loss -> bce_with_logits."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = F.soft_margin_loss(x, torch.sign(x).detach())
        h2 = F.binary_cross_entropy_with_logits(y, torch.sigmoid(y))
        return h1, h2


def get_inputs():
    x = torch.randn(12, 6, 4, 12)
    y = torch.randn(379, 13)
    return [x, y]


def get_init_inputs():
    return []
