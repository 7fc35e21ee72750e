"""Synthetic program (CSP-DAG level 3, seed 5951552290105608526, float16): hardswish -> tanh -> sqrt."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = F.hardswish(x)
        h2 = torch.tanh(h1)
        h3 = torch.sqrt(torch.abs(h2))
        return h3


def get_inputs():
    x = torch.randn(4, 5, 17, dtype=torch.float16)
    return [x]


def get_init_inputs():
    return []
