"""Synthetic program (CSP-DAG level 6, seed 351055115797559080, float16): scale_parameter -> div -> batch_norm -> repeat -> cos -> max_pool2d."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale1 = nn.Parameter(torch.ones(904))
        self.batch_norm1 = nn.BatchNorm1d(904)
        self.to(torch.float16)

    def forward(self, x, y):
        h1 = x * self.scale1
        h2 = h1 / (torch.abs(h1) + 1.0)
        h3 = F.batch_norm(h1, self.batch_norm1.running_mean, self.batch_norm1.running_var, self.batch_norm1.weight, self.batch_norm1.bias, training=False)
        h4 = h3.repeat(2, 1)
        h5 = torch.cos(h1)
        h6 = F.max_pool2d(y, kernel_size=3, stride=3, padding=0)
        return h2, h4, h5, h6


def get_inputs():
    x = torch.randn(4, 904, dtype=torch.float16)
    y = torch.randn(33, 1, 28, 6, dtype=torch.float16)
    return [x, y]


def get_init_inputs():
    return []
