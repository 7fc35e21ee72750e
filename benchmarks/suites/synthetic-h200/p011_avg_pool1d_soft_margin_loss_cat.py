"""Synthetic program (CSP-DAG level 3, seed 1313976301220948579): avg_pool1d -> soft_margin_loss -> cat."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = F.avg_pool1d(x, kernel_size=2, stride=2, padding=0)
        h2 = F.soft_margin_loss(h1, torch.sign(h1).detach())
        h3 = torch.cat([y, y], dim=0)
        return h2, h3


def get_inputs():
    x = torch.randn(72, 22, 141)
    y = torch.randn(1)
    return [x, y]


def get_init_inputs():
    return []
