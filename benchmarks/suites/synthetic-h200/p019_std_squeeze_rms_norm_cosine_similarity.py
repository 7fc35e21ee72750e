"""Synthetic program (CSP-DAG level 4, seed 768913465193918673): std -> squeeze -> rms_norm -> cosine_similarity."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.RMSNorm(57, eps=1e-06)

    def forward(self, x, y, z):
        h1 = torch.std(x, dim=0, keepdim=False)
        h2 = y.squeeze(0)
        h3 = self.norm1(h1)
        h4 = F.cosine_similarity(z, x, dim=1)
        return h2, h3, h4


def get_inputs():
    x = torch.randn(5, 57, 26, 57)
    y = torch.randn(1)
    z = torch.randn(5, 57, 26, 57)
    return [x, y, z]


def get_init_inputs():
    return []
