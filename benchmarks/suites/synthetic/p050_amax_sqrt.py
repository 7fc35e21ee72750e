"""Synthetic program (CSP-DAG level 2, seed 4620467328796251768, bfloat16): amax -> sqrt."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = torch.amax(x, dim=0, keepdim=False)
        h2 = torch.sqrt(torch.abs(h1))
        return h2


def get_inputs():
    x = torch.randn(7, 1, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
