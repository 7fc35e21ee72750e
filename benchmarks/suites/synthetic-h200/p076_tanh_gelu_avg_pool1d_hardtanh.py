"""Synthetic program (CSP-DAG level 4, seed 5508021181789512705, bfloat16): tanh -> gelu -> avg_pool1d -> hardtanh."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = torch.tanh(x)
        h2 = F.gelu(h1, approximate="none")
        h3 = F.avg_pool1d(y, kernel_size=3, stride=3, padding=0)
        h4 = F.hardtanh(h2, min_val=-1.0, max_val=2.0)
        return h3, h4


def get_inputs():
    x = torch.randn(11, 5, dtype=torch.bfloat16)
    y = torch.randn(1, 2, 15, dtype=torch.bfloat16)
    return [x, y]


def get_init_inputs():
    return []
