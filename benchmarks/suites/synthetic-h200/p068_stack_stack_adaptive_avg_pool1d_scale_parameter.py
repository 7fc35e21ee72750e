"""Synthetic program (CSP-DAG level 4, seed 2795240705178166285, float16): stack -> stack -> adaptive_avg_pool1d -> scale_parameter."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale1 = nn.Parameter(torch.ones(9, 1))
        self.to(torch.float16)

    def forward(self, x, y):
        h1 = torch.stack([x, x], dim=3)
        h2 = torch.stack([x, x], dim=2)
        h3 = F.adaptive_avg_pool1d(y, 2)
        h4 = h3 * self.scale1
        return h1, h2, h4


def get_inputs():
    x = torch.randn(46, 149, 8, dtype=torch.float16)
    y = torch.randn(47, 9, 89, dtype=torch.float16)
    return [x, y]


def get_init_inputs():
    return []
