"""Synthetic program (CSP-DAG level 5, seed 7583608013313358716): cross_entropy -> softmax -> amin -> var -> huber_loss."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, target, y, z):
        h1 = F.cross_entropy(x, target)
        h2 = torch.softmax(x, dim=0)
        h3 = torch.amin(y, dim=-1, keepdim=False)
        h4 = torch.var(h2, dim=0, keepdim=True)
        h5 = F.huber_loss(h4, z, delta=0.5)
        return h1, h3, h5


def get_inputs():
    x = torch.randn(172, 64)
    target = torch.randint(0, 64, (172,))
    y = torch.randn(1266, 25)
    z = torch.randn(1, 64)
    return [x, target, y, z]


def get_init_inputs():
    return []
