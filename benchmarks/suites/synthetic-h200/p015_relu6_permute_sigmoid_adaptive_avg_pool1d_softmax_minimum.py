"""Synthetic program (CSP-DAG level 6, seed 3578801296449385461): relu6 -> permute -> sigmoid -> adaptive_avg_pool1d -> softmax -> minimum."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y):
        h1 = F.relu6(x)
        h2 = h1.permute(1, 0)
        h3 = torch.sigmoid(h2)
        h4 = F.adaptive_avg_pool1d(y, 4)
        h5 = torch.softmax(h3, dim=-1)
        h6 = torch.minimum(h4, h2)
        return h5, h6


def get_inputs():
    x = torch.randn(4, 234)
    y = torch.randn(117, 1, 5)
    return [x, y]


def get_init_inputs():
    return []
