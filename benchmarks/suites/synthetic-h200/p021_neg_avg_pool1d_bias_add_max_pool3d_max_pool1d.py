"""Synthetic program (CSP-DAG level 5, seed 589892622630162197): neg -> avg_pool1d -> bias_add -> max_pool3d -> max_pool1d."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias1 = nn.Parameter(torch.zeros(1, 1))

    def forward(self, x, y, z):
        h1 = torch.neg(x)
        h2 = F.avg_pool1d(y, kernel_size=2, stride=1, padding=1)
        h3 = h2 + self.bias1
        h4 = F.max_pool3d(z, kernel_size=3, stride=1, padding=0)
        h5 = F.max_pool1d(h3, kernel_size=3, stride=3, padding=0)
        return h1, h4, h5


def get_inputs():
    x = torch.randn(())
    y = torch.randn(253, 1, 2)
    z = torch.randn(1, 9, 3, 3, 5)
    return [x, y, z]


def get_init_inputs():
    return []
