"""Synthetic program (CSP-DAG level 1, seed 7640656499228254005, float16): hardtanh."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = F.hardtanh(x, min_val=-1.0, max_val=2.0)
        return h1


def get_inputs():
    x = torch.randn(3, 1, 22, 24, dtype=torch.float16)
    return [x]


def get_init_inputs():
    return []
