"""CNN: the everyday Conv2d(3x3, no bias) -> BatchNorm2d -> ReLU(inplace=True) block in eval mode, 128 -> 256
channels on 32 x 128 x 56 x 56 float32 feature maps (51 MB in, 103 MB out).

Eager runs the convolution (cuDNN, TF32 by PyTorch's default), then batch norm and ReLU as two more passes over
the output; the normalisation folds into a per-channel scale and shift of the convolution's epilogue.
"""

import torch
import torch.nn as nn

CATEGORY = "cnn"

BATCH = 32
IN_CHANNELS = 128
OUT_CHANNELS = 256
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
        self.conv = nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        load_trained_statistics(self.bn)

    def forward(self, x):
        x = self.conv(x)
        x = self.bn(x)
        x = self.relu(x)
        return x


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
