"""Synthetic program (CSP-DAG level 1, seed 1770511010215990816, bfloat16): reshape."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = x.reshape(1, 3123)
        return h1


def get_inputs():
    x = torch.randn(3123, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
