"""Synthetic program (CSP-DAG level 2, seed 1313678810073965874): unsqueeze -> max_pool3d."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = x.unsqueeze(1)
        h2 = F.max_pool3d(y, kernel_size=2, stride=2, padding=1)
        return h1, h2


def get_inputs():
    x = torch.randn(1)
    y = torch.randn(8, 2, 21, 7, 13)
    return [x, y]


def get_init_inputs():
    return []
