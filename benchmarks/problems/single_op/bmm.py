"""Single op: batched matrix product (32 x 1024 x 256) @ (32 x 256 x 1024) in float16, like attention scores.

17 GFLOP with a 64 MB output: the output write matters as much as the arithmetic.
"""

import torch
import torch.nn as nn

CATEGORY = "single_op"

BATCH = 32
ROWS = 1024
INNER = 256


class Model(nn.Module):
    def forward(self, a, b):
        return torch.bmm(a, b)


def get_inputs():
    return [
        torch.randn(BATCH, ROWS, INNER, dtype=torch.float16),
        torch.randn(BATCH, INNER, ROWS, dtype=torch.float16),
    ]


def get_init_inputs():
    return []
