"""Synthetic program (CSP-DAG level 2, seed 5914181814301674578, bfloat16): cosine_similarity -> rms_norm."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1 = nn.RMSNorm(1, eps=1e-06)
        self.to(torch.bfloat16)

    def forward(self, x, y):
        h1 = F.cosine_similarity(x, y, dim=0)
        h2 = self.norm1(h1)
        return h2


def get_inputs():
    x = torch.randn(131, 1, dtype=torch.bfloat16)
    y = torch.randn(131, 1, dtype=torch.bfloat16)
    return [x, y]


def get_init_inputs():
    return []
