"""Synthetic program (CSP-DAG level 4, seed 1826425125637842658): mul -> sin -> cat -> erf."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = x * x
        h2 = torch.sin(h1)
        h3 = torch.cat([h2, h1], dim=2)
        h4 = torch.erf(h3)
        return h4


def get_inputs():
    x = torch.randn(2, 14, 9)
    return [x]


def get_init_inputs():
    return []
