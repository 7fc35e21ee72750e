"""Synthetic program (CSP-DAG level 2, seed 7273929895706650516, float16): scale_parameter -> max_pool1d."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale1 = nn.Parameter(torch.ones(583))
        self.to(torch.float16)

    def forward(self, x, y):
        h1 = x * self.scale1
        h2 = F.max_pool1d(y, kernel_size=2, stride=2, padding=1)
        return h1, h2


def get_inputs():
    x = torch.randn(4, 583, dtype=torch.float16)
    y = torch.randn(1, 1, 62, dtype=torch.float16)
    return [x, y]


def get_init_inputs():
    return []
