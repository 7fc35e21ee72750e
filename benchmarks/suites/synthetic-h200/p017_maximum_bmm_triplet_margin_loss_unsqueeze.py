"""Synthetic program (CSP-DAG level 4, seed 1088862512773321794, bfloat16): maximum -> bmm -> triplet_margin_loss -> unsqueeze."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x, y, z, w, x4):
        h1 = torch.maximum(x, x)
        h2 = torch.bmm(y, z)
        h3 = F.triplet_margin_loss(w, x4, x4, margin=0.5)
        h4 = h3.unsqueeze(0)
        return h1, h2, h4


def get_inputs():
    x = torch.randn((), dtype=torch.bfloat16)
    y = torch.randn(127, 2, 57, dtype=torch.bfloat16)
    z = torch.randn(127, 57, 234, dtype=torch.bfloat16)
    w = torch.randn(3, 61, dtype=torch.bfloat16)
    x4 = torch.randn(3, 61, dtype=torch.bfloat16)
    return [x, y, z, w, x4]


def get_init_inputs():
    return []
