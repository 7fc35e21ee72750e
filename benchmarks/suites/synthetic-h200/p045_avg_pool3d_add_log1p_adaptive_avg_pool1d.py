"""Synthetic program (CSP-DAG level 4, seed 1274998246624283850): avg_pool3d -> add -> log1p -> adaptive_avg_pool1d."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        h1 = F.avg_pool3d(x, kernel_size=3, stride=3, padding=1)
        h2 = y + y
        h3 = torch.log1p(torch.abs(h2))
        h4 = F.adaptive_avg_pool1d(z, 4)
        return h1, h3, h4


def get_inputs():
    x = torch.randn(6, 24, 21, 9, 18)
    y = torch.randn(33)
    z = torch.randn(51, 3, 6)
    return [x, y, z]


def get_init_inputs():
    return []
