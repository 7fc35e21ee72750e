"""Synthetic program (CSP-DAG level 4, seed 823629348443257080, float16): softsign -> adaptive_max_pool2d -> abs -> abs."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = F.softsign(x)
        h2 = F.adaptive_max_pool2d(y, 2)
        h3 = torch.abs(h2)
        h4 = torch.abs(h3)
        return h1, h4


def get_inputs():
    x = torch.randn(112, 34, 11, dtype=torch.float16)
    y = torch.randn(52, 3, 33, 4, dtype=torch.float16)
    return [x, y]


def get_init_inputs():
    return []
