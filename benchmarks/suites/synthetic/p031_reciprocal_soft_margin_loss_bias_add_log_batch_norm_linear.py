"""Synthetic program (CSP-DAG level 6, seed 5587325673221327853): reciprocal -> soft_margin_loss -> bias_add -> log -> batch_norm -> linear."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.bias1 = nn.Parameter(torch.zeros(1, 1, 1))
        self.batch_norm1 = nn.BatchNorm2d(1)
        self.linear1 = nn.Linear(33, 67)

    def forward(self, x, y, z):
        h1 = 1.0 / (torch.abs(x) + 1.0)
        h2 = F.soft_margin_loss(y, torch.sign(y).detach())
        h3 = y + self.bias1
        h4 = torch.log(torch.abs(z) + 1e-6)
        h5 = F.batch_norm(h3, self.batch_norm1.running_mean, self.batch_norm1.running_var, self.batch_norm1.weight, self.batch_norm1.bias, training=False)
        h6 = self.linear1(h4)
        return h1, h2, h5, h6


def get_inputs():
    x = torch.randn(())
    y = torch.randn(1, 1, 6, 15)
    z = torch.randn(16, 33)
    return [x, y, z]


def get_init_inputs():
    return []
