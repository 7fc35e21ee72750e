"""CNN: a squeeze-and-excitation block (global average pool, 1x1 conv reduce, ReLU, 1x1 conv expand, sigmoid,
rescale the input per channel), 256 channels reduced 16x, on 64 x 256 x 56 x 56 bfloat16 feature maps (103 MB in
and out).

Two reads of the input (the pool, then the rescale) around a tiny per-image MLP.
"""

import torch
import torch.nn as nn

CATEGORY = "cnn"

BATCH = 64
CHANNELS = 256
SIZE = 56
REDUCTION = 16


class Model(nn.Module):
    def __init__(self, channels, reduction):
        super().__init__()
        squeezed = channels // reduction
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc1 = nn.Conv2d(channels, squeezed, 1, dtype=torch.bfloat16)
        self.fc2 = nn.Conv2d(squeezed, channels, 1, dtype=torch.bfloat16)
        self.activation = nn.ReLU(inplace=True)
        self.scale_activation = nn.Sigmoid()

    def _scale(self, input):
        scale = self.avgpool(input)
        scale = self.fc1(scale)
        scale = self.activation(scale)
        scale = self.fc2(scale)
        return self.scale_activation(scale)

    def forward(self, input):
        scale = self._scale(input)
        return scale * input


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE, dtype=torch.bfloat16)]


def get_init_inputs():
    return [CHANNELS, REDUCTION]
