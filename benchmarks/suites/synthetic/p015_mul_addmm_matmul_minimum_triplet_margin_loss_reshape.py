"""Synthetic program (CSP-DAG level 6, seed 3375587113543264493): mul -> addmm -> matmul -> minimum -> triplet_margin_loss -> reshape."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        h1 = x * y
        h2 = torch.addmm(h1, y, h1)
        h3 = h2 @ h2
        h4 = torch.minimum(h3, h2)
        h5 = F.triplet_margin_loss(h4, z, h2, margin=1.0)
        h6 = x.reshape(1, 5)
        return h5, h6


def get_inputs():
    x = torch.randn(5)
    y = torch.randn(5, 5)
    z = torch.randn(5, 5)
    return [x, y, z]


def get_init_inputs():
    return []
