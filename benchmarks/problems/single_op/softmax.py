"""Single op: softmax over the last dimension of 8192 rows x 2048 columns in float32 (64 MB).

A row reduction (max, then sum of exponentials) followed by an elementwise pass: one read, one write at best.
"""

import torch
import torch.nn as nn

CATEGORY = "single_op"

ROWS = 8192
COLUMNS = 2048


class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)


def get_inputs():
    return [torch.randn(ROWS, COLUMNS)]


def get_init_inputs():
    return []
