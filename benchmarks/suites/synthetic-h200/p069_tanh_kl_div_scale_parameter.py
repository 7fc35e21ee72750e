"""Synthetic program (CSP-DAG level 3, seed 5753628826461464808): tanh -> kl_div -> scale_parameter."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale1 = nn.Parameter(torch.ones(11))

    def forward(self, x):
        h1 = torch.tanh(x)
        h2 = F.kl_div(F.log_softmax(h1, dim=-1), F.softmax(h1, dim=-1), reduction="batchmean")
        h3 = x * self.scale1
        return h2, h3


def get_inputs():
    x = torch.randn(12, 11)
    return [x]


def get_init_inputs():
    return []
