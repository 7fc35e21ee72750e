"""Synthetic program (CSP-DAG level 2, seed 4678182750523904571, bfloat16): selu -> max_pool2d."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = F.selu(x)
        h2 = F.max_pool2d(h1, kernel_size=3, stride=2, padding=0)
        return h2


def get_inputs():
    x = torch.randn(27, 10, 8, 11, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
