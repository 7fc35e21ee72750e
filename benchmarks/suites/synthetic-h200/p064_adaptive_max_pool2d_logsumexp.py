"""Synthetic program (CSP-DAG level 2, seed 5308997310153237979): adaptive_max_pool2d -> logsumexp."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = F.adaptive_max_pool2d(x, 2)
        h2 = torch.logsumexp(h1, dim=-1, keepdim=False)
        return h2


def get_inputs():
    x = torch.randn(10, 6, 20, 37)
    return [x]


def get_init_inputs():
    return []
