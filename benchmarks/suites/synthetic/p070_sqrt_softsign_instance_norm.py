"""Synthetic program (CSP-DAG level 3, seed 574249691214035703): sqrt -> softsign -> instance_norm."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.instance_norm1 = nn.InstanceNorm2d(5, affine=True)

    def forward(self, x):
        h1 = torch.sqrt(torch.abs(x))
        h2 = F.softsign(x)
        h3 = self.instance_norm1(h1)
        return h2, h3


def get_inputs():
    x = torch.randn(1, 5, 1, 2)
    return [x]


def get_init_inputs():
    return []
