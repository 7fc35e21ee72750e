"""Synthetic program (CSP-DAG level 1, seed 1468105749346929686): cat."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = torch.cat([x, x], dim=1)
        return h1


def get_inputs():
    x = torch.randn(19, 3, 1, 20)
    return [x]


def get_init_inputs():
    return []
