"""Synthetic program (CSP-DAG level 3, seed 7978329229299869726, bfloat16): cosine_similarity -> log_softmax -> selu."""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        h1 = F.cosine_similarity(x, x, dim=0)
        h2 = torch.log_softmax(h1, dim=0)
        h3 = F.selu(h2)
        return h3


def get_inputs():
    x = torch.randn(12, 5, 5, 8, dtype=torch.bfloat16)
    return [x]


def get_init_inputs():
    return []
