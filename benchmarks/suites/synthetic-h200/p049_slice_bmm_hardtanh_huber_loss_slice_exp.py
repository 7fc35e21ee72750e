"""Synthetic program (CSP-DAG level 6, seed 4467066327781362841): slice -> bmm -> hardtanh -> huber_loss -> slice -> exp."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        h1 = x[:, :41]
        h2 = torch.bmm(y, z)
        h3 = F.hardtanh(h2, min_val=-2.0, max_val=2.0)
        h4 = F.huber_loss(h1, x, delta=0.5)
        h5 = h3[:, :, :1]
        h6 = torch.exp(torch.clamp(h4, max=10.0))
        return h5, h6


def get_inputs():
    x = torch.randn(17, 41, 17, 7)
    y = torch.randn(9, 58, 39)
    z = torch.randn(9, 39, 6)
    return [x, y, z]


def get_init_inputs():
    return []
