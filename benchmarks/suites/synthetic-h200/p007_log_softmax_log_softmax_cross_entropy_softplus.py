"""Synthetic program (CSP-DAG level 4, seed 4819598954154460871): log_softmax -> log_softmax -> cross_entropy -> softplus."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, target):
        h1 = torch.log_softmax(x, dim=2)
        h2 = torch.log_softmax(h1, dim=0)
        h3 = F.cross_entropy(y, target)
        h4 = F.softplus(h3, beta=2.0)
        return h2, h4


def get_inputs():
    x = torch.randn(25, 43, 41, 4)
    y = torch.randn(159, 656)
    target = torch.randint(0, 656, (159,))
    return [x, y, target]


def get_init_inputs():
    return []
