"""Synthetic program (CSP-DAG level 6, seed 3684155685880223351): where -> tanh -> soft_margin_loss -> avg_pool3d -> exp -> bmm."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z, w):
        h1 = torch.where(x > 0, x, x)
        h2 = torch.tanh(h1)
        h3 = F.soft_margin_loss(h2, torch.sign(h1).detach())
        h4 = F.avg_pool3d(y, kernel_size=2, stride=1, padding=1)
        h5 = torch.exp(torch.clamp(h3, max=10.0))
        h6 = torch.bmm(z, w)
        return h4, h5, h6


def get_inputs():
    x = torch.randn(16)
    y = torch.randn(19, 3, 4, 4, 7)
    z = torch.randn(70, 2, 60)
    w = torch.randn(70, 60, 12)
    return [x, y, z, w]


def get_init_inputs():
    return []
