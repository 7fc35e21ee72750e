"""Synthetic program (CSP-DAG level 5, seed 1015824814335331359, float16): soft_margin_loss -> max_pool3d -> logsigmoid -> minimum -> relu."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = F.soft_margin_loss(x, torch.sign(x).detach())
        h2 = F.max_pool3d(y, kernel_size=2, stride=1, padding=1)
        h3 = F.logsigmoid(h1)
        h4 = torch.minimum(h3, x)
        h5 = torch.relu(h4)
        return h2, h5


def get_inputs():
    x = torch.randn(11, 46, 60, 51, dtype=torch.float16)
    y = torch.randn(3, 12, 7, 14, 3, dtype=torch.float16)
    return [x, y]


def get_init_inputs():
    return []
