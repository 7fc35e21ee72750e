"""Synthetic program (CSP-DAG level 6, seed 1011803472761320938, bfloat16): shift -> permute -> cosine_similarity -> mm -> slice -> div."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = x + -0.5
        h2 = h1.permute(1, 2, 0)
        h3 = F.cosine_similarity(h2, h2, dim=0)
        h4 = torch.mm(h3, h3)
        h5 = h4[:, :1]
        h6 = h5 / (torch.abs(h3) + 1.0)
        return h6


def get_inputs():
    x = torch.randn(231, 131, 231, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
