"""Synthetic program (CSP-DAG level 3, seed 4795272585629081338): bias_add -> avg_pool2d -> neg."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias1 = nn.Parameter(torch.zeros(31))

    def forward(self, x, y):
        h1 = x + self.bias1
        h2 = F.avg_pool2d(y, kernel_size=3, stride=2, padding=0)
        h3 = torch.neg(h2)
        return h1, h3


def get_inputs():
    x = torch.randn(3, 6, 31)
    y = torch.randn(8, 2, 21, 4)
    return [x, y]


def get_init_inputs():
    return []
