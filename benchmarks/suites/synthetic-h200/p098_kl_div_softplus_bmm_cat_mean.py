"""Synthetic program (CSP-DAG level 5, seed 7986482838664408613): kl_div -> softplus -> bmm -> cat -> mean."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        h1 = F.kl_div(F.log_softmax(x, dim=-1), F.softmax(x, dim=-1), reduction="batchmean")
        h2 = F.softplus(h1, beta=1.0)
        h3 = torch.bmm(y, y)
        h4 = torch.cat([h3, z], dim=2)
        h5 = torch.mean(h4, dim=1, keepdim=True)
        return h2, h5


def get_inputs():
    x = torch.randn(158, 6)
    y = torch.randn(32, 57, 57)
    z = torch.randn(32, 57, 2)
    return [x, y, z]


def get_init_inputs():
    return []
