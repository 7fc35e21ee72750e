"""Synthetic program (CSP-DAG level 1, seed 2369737976937253530, bfloat16): max_pool1d."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = F.max_pool1d(x, kernel_size=2, stride=2, padding=0)
        return h1


def get_inputs():
    x = torch.randn(36, 3, 2, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
