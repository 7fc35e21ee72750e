"""Synthetic program (CSP-DAG level 1, seed 5823775767284927738): maximum."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = torch.maximum(x, x)
        return h1


def get_inputs():
    x = torch.randn(2, 10, 2, 3)
    return [x]


def get_init_inputs():
    return []
