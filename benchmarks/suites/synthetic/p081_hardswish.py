"""Synthetic program (CSP-DAG level 1, seed 4760715762052900095): hardswish."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = F.hardswish(x)
        return h1


def get_inputs():
    x = torch.randn(3, 25, 17)
    return [x]


def get_init_inputs():
    return []
