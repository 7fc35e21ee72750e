"""Synthetic program (CSP-DAG level 6, seed 3870465630608741123, float16): layer_norm -> max_pool2d -> abs -> adaptive_avg_pool2d -> selu -> transpose."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(41)
        self.to(torch.float16)

    def forward(self, x, y):
        h1 = self.norm1(x)
        h2 = F.max_pool2d(y, kernel_size=3, stride=2, padding=0)
        h3 = torch.abs(h1)
        h4 = F.adaptive_avg_pool2d(h2, 2)
        h5 = F.selu(h3)
        h6 = h4.transpose(0, 3)
        return h5, h6


def get_inputs():
    x = torch.randn(135, 81, 41, dtype=torch.float16)
    y = torch.randn(4, 32, 8, 15, dtype=torch.float16)
    return [x, y]


def get_init_inputs():
    return []
