"""Synthetic program (CSP-DAG level 5, seed 6936553186599072911): mish -> bmm -> mean -> reciprocal -> cat."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        h1 = F.mish(x)
        h2 = torch.bmm(y, y)
        h3 = torch.mean(z, dim=1, keepdim=True)
        h4 = 1.0 / (torch.abs(h3) + 1.0)
        h5 = torch.cat([h4, h3], dim=1)
        return h1, h2, h5


def get_inputs():
    x = torch.randn(25, 10, 2, 21)
    y = torch.randn(146, 110, 110)
    z = torch.randn(1, 1, 19, 2)
    return [x, y, z]


def get_init_inputs():
    return []
