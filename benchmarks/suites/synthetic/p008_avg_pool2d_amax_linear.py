"""Synthetic program (CSP-DAG level 3, seed 5659352491608951170, bfloat16): avg_pool2d -> amax -> linear."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(2, 11)
        self.to(torch.bfloat16)

    def forward(self, x):
        h1 = F.avg_pool2d(x, kernel_size=3, stride=3, padding=1)
        h2 = torch.amax(x, dim=2, keepdim=False)
        h3 = self.linear1(h1)
        return h2, h3


def get_inputs():
    x = torch.randn(7, 4, 11, 5, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
