"""Synthetic program (CSP-DAG level 5, seed 4661637539084009943, float16): relu -> adaptive_avg_pool2d -> logsigmoid -> addmm -> silu."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z, w):
        h1 = torch.relu(x)
        h2 = F.adaptive_avg_pool2d(h1, 4)
        h3 = F.logsigmoid(h2)
        h4 = torch.addmm(y, z, w)
        h5 = F.silu(h4)
        return h3, h5


def get_inputs():
    x = torch.randn(2, 9, 4, 12, dtype=torch.float16)
    y = torch.randn(15454, dtype=torch.float16)
    z = torch.randn(24, 13, dtype=torch.float16)
    w = torch.randn(13, 15454, dtype=torch.float16)
    return [x, y, z, w]


def get_init_inputs():
    return []
