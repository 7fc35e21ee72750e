"""Synthetic program (CSP-DAG level 6, seed 1369418896812675309): std -> adaptive_max_pool1d -> erf -> transpose -> mm -> permute."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z, w):
        h1 = torch.std(x, dim=2, keepdim=True)
        h2 = F.adaptive_max_pool1d(y, 1)
        h3 = torch.erf(h2)
        h4 = h3.transpose(0, 2)
        h5 = torch.mm(z, w)
        h6 = h1.permute(2, 0, 1, 3)
        return h4, h5, h6


def get_inputs():
    x = torch.randn(5, 39, 5, 5)
    y = torch.randn(19, 14, 1)
    z = torch.randn(17, 3740)
    w = torch.randn(3740, 2123)
    return [x, y, z, w]


def get_init_inputs():
    return []
