"""Synthetic program (CSP-DAG level 1, seed 3544319855784641267, bfloat16): layer_norm."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(7)
        self.to(torch.bfloat16)

    def forward(self, x):
        h1 = self.norm1(x)
        return h1


def get_inputs():
    x = torch.randn(233, 168, 7, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
