"""Synthetic program (CSP-DAG level 3, seed 8481717785450256077): adaptive_max_pool2d -> where -> max_pool1d."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = F.adaptive_max_pool2d(x, 1)
        h2 = torch.where(h1 > 0, h1, h1)
        h3 = F.max_pool1d(y, kernel_size=2, stride=1, padding=1)
        return h2, h3


def get_inputs():
    x = torch.randn(10, 50, 2, 2)
    y = torch.randn(127, 123, 8)
    return [x, y]


def get_init_inputs():
    return []
