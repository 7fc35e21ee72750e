"""Synthetic program (CSP-DAG level 4, seed 1271459580949429833): cat -> scale_parameter -> softplus -> max_pool3d."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale1 = nn.Parameter(torch.ones(2))

    def forward(self, x, y):
        h1 = torch.cat([x, x], dim=0)
        h2 = h1 * self.scale1
        h3 = F.softplus(h2, beta=2.0)
        h4 = F.max_pool3d(y, kernel_size=3, stride=1, padding=0)
        return h3, h4


def get_inputs():
    x = torch.randn(1)
    y = torch.randn(2, 11, 3, 11, 3)
    return [x, y]


def get_init_inputs():
    return []
