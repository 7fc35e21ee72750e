"""Synthetic program (CSP-DAG level 6, seed 6952547758040544280, float16): max_pool3d -> adaptive_avg_pool2d -> reshape -> selu -> logsigmoid -> mish."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z):
        h1 = F.max_pool3d(x, kernel_size=2, stride=2, padding=0)
        h2 = F.adaptive_avg_pool2d(y, 2)
        h3 = z.reshape(3, 42)
        h4 = F.selu(z)
        h5 = F.logsigmoid(h4)
        h6 = F.mish(h3)
        return h1, h2, h5, h6


def get_inputs():
    x = torch.randn(5, 1, 5, 2, 2, dtype=torch.float16)
    y = torch.randn(14, 5, 2, 4, dtype=torch.float16)
    z = torch.randn(126, dtype=torch.float16)
    return [x, y, z]


def get_init_inputs():
    return []
