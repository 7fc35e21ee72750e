"""Single op: a 4096 -> 4096 linear layer (with bias) on 8 x 1024 tokens in bfloat16: a transformer projection.

Compute-bound: 2 * 8192 * 4096 * 4096 = 275 GFLOP against 64 MB of activations and 32 MB of weights.
"""

import torch
import torch.nn as nn

CATEGORY = "single_op"

BATCH = 8
SEQUENCE = 1024
HIDDEN = 4096


class Model(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.projection = nn.Linear(hidden, hidden).to(torch.bfloat16)

    def forward(self, x):
        return self.projection(x)


def get_inputs():
    return [torch.randn(BATCH, SEQUENCE, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN]
