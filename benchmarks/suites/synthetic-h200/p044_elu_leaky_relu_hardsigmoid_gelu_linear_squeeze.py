"""Synthetic program (CSP-DAG level 6, seed 6687594799474425512): elu -> leaky_relu -> hardsigmoid -> gelu -> linear -> squeeze."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(4, 870)

    def forward(self, x):
        h1 = F.elu(x, alpha=1.0)
        h2 = F.leaky_relu(h1, negative_slope=0.2)
        h3 = F.hardsigmoid(h2)
        h4 = F.gelu(h3, approximate="none")
        h5 = self.linear1(h4)
        h6 = x.squeeze(1)
        return h5, h6


def get_inputs():
    x = torch.randn(3, 1, 10, 4)
    return [x]


def get_init_inputs():
    return []
