"""Synthetic program (CSP-DAG level 2, seed 9011911416617012396): flatten -> triplet_margin_loss."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = torch.flatten(x, 0)
        h2 = F.triplet_margin_loss(y, y, y, margin=0.5)
        return h1, h2


def get_inputs():
    x = torch.randn(39, 2, 136)
    y = torch.randn(18, 200)
    return [x, y]


def get_init_inputs():
    return []
