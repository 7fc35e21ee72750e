"""Synthetic program (CSP-DAG level 1, seed 577019990050668527): logsumexp."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = torch.logsumexp(x, dim=0, keepdim=False)
        return h1


def get_inputs():
    x = torch.randn(4, 20, 15)
    return [x]


def get_init_inputs():
    return []
