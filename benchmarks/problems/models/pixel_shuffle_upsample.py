"""CNN: a super-resolution upsampler (ESPCN / EDSR style): conv3x3 to 4x the channels, PixelShuffle(2) to twice the
resolution, then a per-channel PReLU; 64 channels, 16 x 64 x 128 x 128 float32 in (67 MB), 16 x 64 x 256 x 256
out (268 MB).

Pixel shuffle is a pure permutation of the convolution's output; eager materialises it before the PReLU pass.
"""

import torch
import torch.nn as nn

CATEGORY = "cnn"

BATCH = 16
CHANNELS = 64
SIZE = 128
SCALE = 2


class Model(nn.Module):
    def __init__(self, channels, scale):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels * scale**2, kernel_size=3, padding=1)
        self.shuffle = nn.PixelShuffle(scale)
        self.prelu = nn.PReLU(num_parameters=channels, init=0.1)
        with torch.no_grad():
            self.prelu.weight.uniform_(0.05, 0.3)

    def forward(self, x):
        return self.prelu(self.shuffle(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS, SCALE]
