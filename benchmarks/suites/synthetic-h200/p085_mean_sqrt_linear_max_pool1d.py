"""Synthetic program (CSP-DAG level 4, seed 5008414455385432183, bfloat16): mean -> sqrt -> linear -> max_pool1d."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(1, 2)
        self.to(torch.bfloat16)

    def forward(self, x):
        h1 = torch.mean(x, dim=2, keepdim=False)
        h2 = torch.sqrt(torch.abs(x))
        h3 = self.linear1(h1)
        h4 = F.max_pool1d(h3, kernel_size=2, stride=2, padding=0)
        return h2, h4


def get_inputs():
    x = torch.randn(4, 3, 9, 1, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
