"""Single op: 2x2 average pooling with stride 2 over 32 x 256 x 56 x 56 in bfloat16 (51 MB), a downsampling stage.

Memory-bound: read everything once, write a quarter.
"""

import torch
import torch.nn as nn

CATEGORY = "single_op"

BATCH = 32
CHANNELS = 256
SIZE = 56


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.AvgPool2d(kernel_size=2, stride=2)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
