"""Synthetic program (CSP-DAG level 5, seed 6510325388513461715): hardtanh -> minimum -> cos -> rms_norm -> max_pool1d."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.RMSNorm(4630, eps=1e-06)

    def forward(self, x, y):
        h1 = F.hardtanh(x, min_val=-1.0, max_val=1.0)
        h2 = torch.minimum(h1, x)
        h3 = torch.cos(h2)
        h4 = self.norm1(h3)
        h5 = F.max_pool1d(y, kernel_size=3, stride=1, padding=1)
        return h4, h5


def get_inputs():
    x = torch.randn(4630)
    y = torch.randn(3, 1, 8)
    return [x, y]


def get_init_inputs():
    return []
