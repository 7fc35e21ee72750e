"""Synthetic program (CSP-DAG level 2, seed 6097426524612382078): avg_pool3d -> sigmoid."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = F.avg_pool3d(x, kernel_size=3, stride=3, padding=0)
        h2 = torch.sigmoid(y)
        return h1, h2


def get_inputs():
    x = torch.randn(6, 27, 24, 8, 5)
    y = torch.randn(1)
    return [x, y]


def get_init_inputs():
    return []
