"""Fusion: GEGLU, split the projected tensor in two halves and return gelu(a) * b, on 4096 tokens x 8192
float32 features (128 MB in, 64 MB out).

The split is a view; eager still writes gelu(a) before the multiply reads it back.
"""

import torch
import torch.nn as nn

CATEGORY = "fusion"

TOKENS = 4096
FEATURES = 8192


class Model(nn.Module):
    def forward(self, x):
        a, b = x.chunk(2, dim=-1)
        return nn.functional.gelu(a) * b


def get_inputs():
    return [torch.randn(TOKENS, FEATURES)]


def get_init_inputs():
    return []
