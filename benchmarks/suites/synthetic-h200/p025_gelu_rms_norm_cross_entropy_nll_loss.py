"""Synthetic program (CSP-DAG level 4, seed 8677231397818488375): gelu -> rms_norm -> cross_entropy -> nll_loss."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.RMSNorm(1771, eps=1e-06)

    def forward(self, x, target, y, target1):
        h1 = F.gelu(x, approximate="none")
        h2 = self.norm1(h1)
        h3 = F.cross_entropy(h2, target)
        h4 = F.nll_loss(F.log_softmax(y, dim=1), target1)
        return h3, h4


def get_inputs():
    x = torch.randn(6, 1771)
    target = torch.randint(0, 1771, (6,))
    y = torch.randn(3, 3)
    target1 = torch.randint(0, 3, (3,))
    return [x, target, y, target1]


def get_init_inputs():
    return []
