"""Fusion: the SwiGLU gate, (gate * sigmoid(gate)) * up, on 8192 tokens x 4096 in float16 (64 MB per tensor),
written as the x * sigmoid(x) chain a user would write.

Eager: sigmoid, two multiplies, each a full pass; fused, two reads and one write.
"""

import torch
import torch.nn as nn

CATEGORY = "fusion"

TOKENS = 8192
HIDDEN = 4096


class Model(nn.Module):
    def forward(self, gate, up):
        return gate * torch.sigmoid(gate) * up


def get_inputs():
    return [
        torch.randn(TOKENS, HIDDEN, dtype=torch.float16),
        torch.randn(TOKENS, HIDDEN, dtype=torch.float16),
    ]


def get_init_inputs():
    return []
