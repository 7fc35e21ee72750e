"""Synthetic program (CSP-DAG level 5, seed 2742618020699531268, bfloat16): logsigmoid -> addmm -> logsigmoid -> exp -> gelu."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z, w):
        h1 = F.logsigmoid(x)
        h2 = torch.addmm(y, z, z)
        h3 = F.logsigmoid(w)
        h4 = torch.exp(torch.clamp(h1, max=10.0))
        h5 = F.gelu(h2, approximate="tanh")
        return h3, h4, h5


def get_inputs():
    x = torch.randn((), dtype=torch.bfloat16)
    y = torch.randn(177, dtype=torch.bfloat16)
    z = torch.randn(177, 177, dtype=torch.bfloat16)
    w = torch.randn((), dtype=torch.bfloat16)
    return [x, y, z, w]


def get_init_inputs():
    return []
