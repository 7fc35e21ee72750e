"""Synthetic program (CSP-DAG level 4, seed 295235020099013365): sum -> logsigmoid -> flatten -> silu."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = torch.sum(x, dim=0, keepdim=True)
        h2 = F.logsigmoid(h1)
        h3 = torch.flatten(h2, 0)
        h4 = F.silu(h3)
        return h4


def get_inputs():
    x = torch.randn(152, 3)
    return [x]


def get_init_inputs():
    return []
