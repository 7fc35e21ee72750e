"""Synthetic program (CSP-DAG level 1, seed 3515670766534722020, float16): adaptive_avg_pool1d."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = F.adaptive_avg_pool1d(x, 4)
        return h1


def get_inputs():
    x = torch.randn(18, 87, 57, dtype=torch.float16)
    return [x]


def get_init_inputs():
    return []
