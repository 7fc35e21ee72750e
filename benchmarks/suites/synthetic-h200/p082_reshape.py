"""Synthetic program (CSP-DAG level 1, seed 5389422463523902343, float16): reshape."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = x.reshape(216, 1, 457)
        return h1


def get_inputs():
    x = torch.randn(216, 457, dtype=torch.float16)
    return [x]


def get_init_inputs():
    return []
