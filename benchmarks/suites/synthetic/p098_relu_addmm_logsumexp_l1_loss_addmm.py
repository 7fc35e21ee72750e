"""Synthetic program (CSP-DAG level 5, seed 2388108831419103377): relu -> addmm -> logsumexp -> l1_loss -> addmm."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = torch.relu(x)
        h2 = torch.addmm(x, h1, y)
        h3 = torch.logsumexp(h2, dim=1, keepdim=False)
        h4 = F.l1_loss(h3, h3)
        h5 = torch.addmm(h1, h2, h1)
        return h4, h5


def get_inputs():
    x = torch.randn(119, 1)
    y = torch.randn(1, 119)
    return [x, y]


def get_init_inputs():
    return []
