"""Synthetic program (CSP-DAG level 6, seed 4380766542648063306, bfloat16): scale -> scale_parameter -> mul -> logsigmoid -> nll_loss -> rsqrt."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale1 = nn.Parameter(torch.ones(19, 1))
        self.to(torch.bfloat16)

    def forward(self, x, y, z, target):
        h1 = x * 0.125
        h2 = y * self.scale1
        h3 = h2 * y
        h4 = F.logsigmoid(h1)
        h5 = F.nll_loss(F.log_softmax(z, dim=1), target)
        h6 = torch.rsqrt(torch.abs(h3) + 1e-6)
        return h4, h5, h6


def get_inputs():
    x = torch.randn((), dtype=torch.bfloat16)
    y = torch.randn(13, 19, 1, dtype=torch.bfloat16)
    z = torch.randn(90, 225, dtype=torch.bfloat16)
    target = torch.randint(0, 225, (90,))
    return [x, y, z, target]


def get_init_inputs():
    return []
