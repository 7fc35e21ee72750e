"""Synthetic program (CSP-DAG level 2, seed 1223354229720877356): avg_pool3d -> shift."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = F.avg_pool3d(x, kernel_size=3, stride=1, padding=1)
        h2 = y + -0.5
        return h1, h2


def get_inputs():
    x = torch.randn(6, 16, 5, 3, 3)
    y = torch.randn(2, 29, 24, 7)
    return [x, y]


def get_init_inputs():
    return []
