"""Single op: a ResNet stem's max pooling (3x3 window, stride 2, padding 1) over 16 x 64 x 112 x 112 float32 (51 MB).

Memory-bound: the output is a quarter of the input; overlapping windows reread neighbours (from cache).
"""

import torch
import torch.nn as nn

CATEGORY = "single_op"

BATCH = 16
CHANNELS = 64
SIZE = 112


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)

    def forward(self, x):
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return []
