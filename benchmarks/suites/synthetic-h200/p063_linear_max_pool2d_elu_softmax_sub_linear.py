"""Synthetic program (CSP-DAG level 6, seed 1710421576563016649, float16): linear -> max_pool2d -> elu -> softmax -> sub -> linear."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear1 = nn.Linear(2, 57)
        self.linear2 = nn.Linear(19, 9)
        self.to(torch.float16)

    def forward(self, x):
        h1 = self.linear1(x)
        h2 = F.max_pool2d(h1, kernel_size=3, stride=3, padding=0)
        h3 = F.elu(h2, alpha=1.0)
        h4 = torch.softmax(h3, dim=0)
        h5 = h4 - h2
        h6 = self.linear2(h5)
        return h6


def get_inputs():
    x = torch.randn(61, 11, 10, 2, dtype=torch.float16)
    return [x]


def get_init_inputs():
    return []
