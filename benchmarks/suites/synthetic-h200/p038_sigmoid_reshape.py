"""Synthetic program (CSP-DAG level 2, seed 4601752790153323558, float16): sigmoid -> reshape."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = torch.sigmoid(x)
        h2 = y.reshape(14, 1, 1, 9)
        return h1, h2


def get_inputs():
    x = torch.randn(3, 60, 15, 17, dtype=torch.float16)
    y = torch.randn(14, 1, 9, dtype=torch.float16)
    return [x, y]


def get_init_inputs():
    return []
