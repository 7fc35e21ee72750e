"""Fusion: LayerNorm followed by GELU (a normalised activation block) on 4096 tokens x 4096 in float32 (64 MB).

Eager writes the normalised tensor and reads it back; fused, one read and one write.
"""

import torch
import torch.nn as nn

CATEGORY = "fusion"

TOKENS = 4096
HIDDEN = 4096


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return nn.functional.gelu(self.norm(x))


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
