"""Synthetic program (CSP-DAG level 2, seed 1549691940500742559): flatten -> vector_norm."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = torch.flatten(x, 2)
        h2 = torch.linalg.vector_norm(h1, dim=1, keepdim=False)
        return h2


def get_inputs():
    x = torch.randn(15, 18, 21, 5)
    return [x]


def get_init_inputs():
    return []
