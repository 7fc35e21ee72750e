"""Synthetic program (CSP-DAG level 5, seed 6021256408404363813, bfloat16): div -> cross_entropy -> soft_margin_loss -> celu -> layer_norm."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(205)
        self.to(torch.bfloat16)

    def forward(self, x, y, target, z, w):
        h1 = x / (torch.abs(x) + 1.0)
        h2 = F.cross_entropy(y, target)
        h3 = F.soft_margin_loss(y, torch.sign(z).detach())
        h4 = F.celu(h3, alpha=0.5)
        h5 = self.norm1(w)
        return h1, h2, h4, h5


def get_inputs():
    x = torch.randn((), dtype=torch.bfloat16)
    y = torch.randn(3, 15, dtype=torch.bfloat16)
    target = torch.randint(0, 15, (3,))
    z = torch.randn(3, 15, dtype=torch.bfloat16)
    w = torch.randn(13, 3, 205, dtype=torch.bfloat16)
    return [x, y, target, z, w]


def get_init_inputs():
    return []
