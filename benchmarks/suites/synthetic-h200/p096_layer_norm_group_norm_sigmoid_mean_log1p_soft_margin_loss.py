"""Synthetic program (CSP-DAG level 6, seed 8181143617495528032): layer_norm -> group_norm -> sigmoid -> mean -> log1p -> soft_margin_loss."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.LayerNorm(5)
        self.group_norm1 = nn.GroupNorm(1, 5)

    def forward(self, x):
        h1 = self.norm1(x)
        h2 = self.group_norm1(h1)
        h3 = torch.sigmoid(h2)
        h4 = torch.mean(h3, dim=1, keepdim=False)
        h5 = torch.log1p(torch.abs(h4))
        h6 = F.soft_margin_loss(x, torch.sign(x).detach())
        return h5, h6


def get_inputs():
    x = torch.randn(28, 5)
    return [x]


def get_init_inputs():
    return []
