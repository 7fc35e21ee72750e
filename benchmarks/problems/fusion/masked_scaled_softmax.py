"""Fusion: attention probabilities softmax(scores * scale + mask) for 8 x 16 heads x 512 x 512 in float16 (64 MB),
with an additive causal mask given as an input broadcast over batch and heads.

Eager: a multiply, an add and a softmax, each a full pass over the scores.
"""

import math

import torch
import torch.nn as nn

CATEGORY = "fusion"

BATCH = 8
HEADS = 16
SEQUENCE = 512
HEAD_DIM = 64


class Model(nn.Module):
    def __init__(self, head_dim):
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, scores, mask):
        return torch.softmax(scores * self.scale + mask, dim=-1)


def get_inputs():
    causal = torch.full((SEQUENCE, SEQUENCE), -10000.0).triu(1)
    return [
        torch.randn(BATCH, HEADS, SEQUENCE, SEQUENCE, dtype=torch.float16) * 4,
        causal.to(torch.float16)[None, None],
    ]


def get_init_inputs():
    return [HEAD_DIM]
