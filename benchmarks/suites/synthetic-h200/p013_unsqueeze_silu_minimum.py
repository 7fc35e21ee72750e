"""Synthetic program (CSP-DAG level 3, seed 7374953885685961931): unsqueeze -> silu -> minimum."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = x.unsqueeze(3)
        h2 = F.silu(h1)
        h3 = torch.minimum(h2, h1)
        return h3


def get_inputs():
    x = torch.randn(47, 34, 35)
    return [x]


def get_init_inputs():
    return []
