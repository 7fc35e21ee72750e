"""Synthetic program (CSP-DAG level 1, seed 3785625748769719136): reshape."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = x.reshape(73, 22, 1, 233)
        return h1


def get_inputs():
    x = torch.randn(73, 22, 233)
    return [x]


def get_init_inputs():
    return []
