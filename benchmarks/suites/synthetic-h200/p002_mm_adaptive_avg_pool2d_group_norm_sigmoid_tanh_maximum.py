"""Synthetic program (CSP-DAG level 6, seed 2445523163428039609): mm -> adaptive_avg_pool2d -> group_norm -> sigmoid -> tanh -> maximum."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.group_norm1 = nn.GroupNorm(4, 4)

    def forward(self, x, y, z):
        h1 = torch.mm(x, x)
        h2 = F.adaptive_avg_pool2d(y, 1)
        h3 = self.group_norm1(h2)
        h4 = torch.sigmoid(h1)
        h5 = torch.tanh(h4)
        h6 = torch.maximum(h3, z)
        return h5, h6


def get_inputs():
    x = torch.randn(41, 41)
    y = torch.randn(7, 4, 10, 2)
    z = torch.randn(1, 5, 87)
    return [x, y, z]


def get_init_inputs():
    return []
