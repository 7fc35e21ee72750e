"""Synthetic program (CSP-DAG level 2, seed 8385639445365110170): sum -> layer_norm."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(39)

    def forward(self, x):
        h1 = torch.sum(x, dim=0, keepdim=False)
        h2 = self.norm1(h1)
        return h2


def get_inputs():
    x = torch.randn(250, 39)
    return [x]


def get_init_inputs():
    return []
