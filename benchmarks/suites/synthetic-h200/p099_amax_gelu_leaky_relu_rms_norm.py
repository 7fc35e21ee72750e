"""Synthetic program (CSP-DAG level 4, seed 2301887836917609876): amax -> gelu -> leaky_relu -> rms_norm."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.RMSNorm(2, eps=1e-06)

    def forward(self, x):
        h1 = torch.amax(x, dim=2, keepdim=True)
        h2 = F.gelu(h1, approximate="none")
        h3 = F.leaky_relu(h2, negative_slope=0.01)
        h4 = self.norm1(h3)
        return h4


def get_inputs():
    x = torch.randn(22, 5, 1, 2)
    return [x]


def get_init_inputs():
    return []
