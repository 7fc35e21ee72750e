"""Synthetic program (CSP-DAG level 2, seed 2007743993271382428): adaptive_max_pool2d -> cosine_similarity."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = F.adaptive_max_pool2d(x, 4)
        h2 = F.cosine_similarity(h1, h1, dim=0)
        return h2


def get_inputs():
    x = torch.randn(10, 15, 30, 4)
    return [x]


def get_init_inputs():
    return []
