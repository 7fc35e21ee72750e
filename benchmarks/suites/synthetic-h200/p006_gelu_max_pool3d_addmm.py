"""Synthetic program (CSP-DAG level 3, seed 7453906895589944200): gelu -> max_pool3d -> addmm."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = F.gelu(x, approximate="tanh")
        h2 = F.max_pool3d(y, kernel_size=2, stride=2, padding=0)
        h3 = torch.addmm(h1, h1, h1)
        return h2, h3


def get_inputs():
    x = torch.randn(6, 6)
    y = torch.randn(26, 5, 2, 15, 5)
    return [x, y]


def get_init_inputs():
    return []
