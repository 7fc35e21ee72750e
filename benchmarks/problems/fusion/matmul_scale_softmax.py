"""Fusion: attention scores and probabilities, softmax(q @ k^T / sqrt(d)), for 32 heads x 1024 queries x
1024 keys with head dimension 128 in bfloat16 (64 MB of probabilities).

Eager writes the scores, rescales them in another pass, then reads them again for the softmax.
"""

import math

import torch
import torch.nn as nn

CATEGORY = "fusion"

HEADS = 32
SEQUENCE = 1024
HEAD_DIM = 128


class Model(nn.Module):
    def __init__(self, head_dim):
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, q, k):
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        return torch.softmax(scores, dim=-1)


def get_inputs():
    return [
        torch.randn(HEADS, SEQUENCE, HEAD_DIM, dtype=torch.bfloat16),
        torch.randn(HEADS, SEQUENCE, HEAD_DIM, dtype=torch.bfloat16),
    ]


def get_init_inputs():
    return [HEAD_DIM]
