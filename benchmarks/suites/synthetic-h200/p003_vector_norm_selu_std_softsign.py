"""Synthetic program (CSP-DAG level 4, seed 5094156135680247360): vector_norm -> selu -> std -> softsign."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = torch.linalg.vector_norm(x, dim=1, keepdim=False)
        h2 = F.selu(h1)
        h3 = torch.std(h2, dim=0, keepdim=False)
        h4 = F.softsign(h3)
        return h4


def get_inputs():
    x = torch.randn(72, 53, 169)
    return [x]


def get_init_inputs():
    return []
