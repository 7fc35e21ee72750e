"""Single op: ReLU over a 4096 x 4096 float32 activation (64 MB), as after an MLP's up-projection.

Memory-bound: every element read once and written once.
"""

import torch
import torch.nn as nn

CATEGORY = "single_op"

ROWS = 4096
HIDDEN = 4096


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    return [torch.randn(ROWS, HIDDEN)]


def get_init_inputs():
    return []
