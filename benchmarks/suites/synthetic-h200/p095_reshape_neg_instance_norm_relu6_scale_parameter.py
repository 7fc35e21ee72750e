"""Synthetic program (CSP-DAG level 5, seed 3541333994658883326): reshape -> neg -> instance_norm -> relu6 -> scale_parameter."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.instance_norm1 = nn.InstanceNorm2d(40, affine=True)
        self.scale1 = nn.Parameter(torch.ones(40, 1, 1))

    def forward(self, x):
        h1 = x.reshape(1, 40, 3, 1)
        h2 = torch.neg(h1)
        h3 = self.instance_norm1(h1)
        h4 = F.relu6(h3)
        h5 = h2 * self.scale1
        return h4, h5


def get_inputs():
    x = torch.randn(40, 3, 1)
    return [x]


def get_init_inputs():
    return []
