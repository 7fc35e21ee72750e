"""Synthetic program (CSP-DAG level 1, seed 7508698048947209302, bfloat16): max_pool1d."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = F.max_pool1d(x, kernel_size=3, stride=2, padding=0)
        return h1


def get_inputs():
    x = torch.randn(6, 1, 3, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
