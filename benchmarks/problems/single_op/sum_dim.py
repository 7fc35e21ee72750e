"""Single op: sum over the middle dimension of a 16 x 1024 x 1024 float32 tensor (64 MB), e.g. pooling over a sequence.

A reduction along a strided (non-innermost) axis: coalescing across the kept last dimension matters.
"""

import torch
import torch.nn as nn

CATEGORY = "single_op"

BATCH = 16
SEQUENCE = 1024
HIDDEN = 1024


class Model(nn.Module):
    def forward(self, x):
        return torch.sum(x, dim=1)


def get_inputs():
    return [torch.randn(BATCH, SEQUENCE, HIDDEN)]


def get_init_inputs():
    return []
