"""Synthetic program (CSP-DAG level 1, seed 4117610071086298505): amin."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = torch.amin(x, dim=0, keepdim=True)
        return h1


def get_inputs():
    x = torch.randn(18, 735)
    return [x]


def get_init_inputs():
    return []
