"""Synthetic program (CSP-DAG level 2, seed 3223882855437898116): scale -> adaptive_avg_pool2d."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = x * 0.125
        h2 = F.adaptive_avg_pool2d(h1, 4)
        return h2


def get_inputs():
    x = torch.randn(1, 6, 5, 4)
    return [x]


def get_init_inputs():
    return []
