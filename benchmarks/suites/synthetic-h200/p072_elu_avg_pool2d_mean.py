"""Synthetic program (CSP-DAG level 3, seed 9123232039452277953, bfloat16): elu -> avg_pool2d -> mean."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = F.elu(x, alpha=0.5)
        h2 = F.avg_pool2d(y, kernel_size=3, stride=2, padding=1)
        h3 = torch.mean(h1, dim=0, keepdim=False)
        return h2, h3


def get_inputs():
    x = torch.randn(7, 39, dtype=torch.bfloat16)
    y = torch.randn(4, 3, 4, 1, dtype=torch.bfloat16)
    return [x, y]


def get_init_inputs():
    return []
