"""Synthetic program (CSP-DAG level 3, seed 409124029742182469): max_pool1d -> bce_with_logits -> sub."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = F.max_pool1d(x, kernel_size=2, stride=2, padding=1)
        h2 = F.binary_cross_entropy_with_logits(h1, torch.sigmoid(y))
        h3 = h2 - y
        return h3


def get_inputs():
    x = torch.randn(118, 14, 40)
    y = torch.randn(118, 14, 21)
    return [x, y]


def get_init_inputs():
    return []
