"""Synthetic program (CSP-DAG level 2, seed 5488010584313560146): sigmoid -> transpose."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = torch.sigmoid(x)
        h2 = y.transpose(0, 2)
        return h1, h2


def get_inputs():
    x = torch.randn(())
    y = torch.randn(5, 36, 2)
    return [x, y]


def get_init_inputs():
    return []
