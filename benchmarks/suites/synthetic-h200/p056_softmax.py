"""Synthetic program (CSP-DAG level 1, seed 3195383968154121542): softmax."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = torch.softmax(x, dim=0)
        return h1


def get_inputs():
    x = torch.randn(25, 4)
    return [x]


def get_init_inputs():
    return []
