"""Synthetic program (CSP-DAG level 2, seed 4606467278203619740, bfloat16): amax -> gelu."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = torch.amax(x, dim=0, keepdim=True)
        h2 = F.gelu(h1, approximate="none")
        return h2


def get_inputs():
    x = torch.randn(4, 1, 3, 33, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
