"""CNN: a DCGAN generator layer: ConvTranspose2d(4x4, stride 2, padding 1, no bias) doubling the resolution,
BatchNorm2d, ReLU(True); 256 -> 128 channels, 64 x 256 x 32 x 32 float32 in (67 MB), 64 x 128 x 64 x 64 out
(134 MB).
"""

import torch
import torch.nn as nn

CATEGORY = "cnn"

BATCH = 64
IN_CHANNELS = 256
OUT_CHANNELS = 128
SIZE = 32


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
        self.main = nn.Sequential(
            nn.ConvTranspose2d(in_channels, out_channels, 4, 2, 1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(True),
        )
        load_trained_statistics(self.main[1])

    def forward(self, input):
        return self.main(input)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
