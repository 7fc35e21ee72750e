"""CNN: a video-network 3-D block: Conv3d(3x3x3, no bias) -> BatchNorm3d -> ReLU(inplace=True), 64 -> 64 channels
on 8 clips x 64 x 16 frames x 56 x 56 float32 (103 MB in, 103 MB out).

89 GFLOP for the convolution; cuDNN's 3-D kernels are less tuned than its 2-D ones.
"""

import torch
import torch.nn as nn

CATEGORY = "cnn"

BATCH = 8
CHANNELS = 64
FRAMES = 16
SIZE = 56


def load_trained_statistics(norm):
    """Give the norm the scale, shift and running statistics a trained checkpoint has (fresh ones make it an
    identity, which would hide a kernel that skips it)."""
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
        norm.running_mean.uniform_(-0.5, 0.5)
        norm.running_var.uniform_(0.5, 2.0)


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.conv = nn.Conv3d(in_channels, out_channels, kernel_size=3, padding=1, bias=False)
        self.bn = nn.BatchNorm3d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        load_trained_statistics(self.bn)

    def forward(self, x):
        return self.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, FRAMES, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS, CHANNELS]
