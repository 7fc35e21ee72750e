"""Fusion: a 3x3 convolution (64 -> 128 channels, no bias) followed by a per-channel bias and ReLU,
on 32 x 64 x 56 x 56 float32 images (26 MB in, 51 MB out).

The convolution stays in cuDNN (which uses TF32 for float32 by PyTorch's default); the bias and ReLU
epilogue is what can fuse.
"""

import torch
import torch.nn as nn

CATEGORY = "fusion"

BATCH = 32
IN_CHANNELS = 64
OUT_CHANNELS = 128
SIZE = 56


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False)
        self.bias = nn.Parameter(torch.randn(out_channels, 1, 1) * 0.1)

    def forward(self, x):
        return torch.relu(self.conv(x) + self.bias)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
