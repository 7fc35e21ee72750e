"""CNN: a U-Net decoder step: ConvTranspose2d(2x2, stride 2) halves the channels and doubles the resolution,
the encoder's skip tensor is concatenated, then two conv3x3-BN-ReLU layers; 256 -> 128 channels, 16 x 256 x 64 x 64
bfloat16 in (34 MB) with a 16 x 128 x 128 x 128 skip (67 MB), 16 x 128 x 128 x 128 out (67 MB).
"""

import torch
import torch.nn as nn

CATEGORY = "cnn"

BATCH = 16
IN_CHANNELS = 256
OUT_CHANNELS = 128
SIZE = 64


def load_trained_statistics(model):
    """Give every batch norm the scale, shift and running statistics a trained checkpoint has (fresh ones make
    it an identity, which would hide a kernel that skips it)."""
    with torch.no_grad():
        for norm in model.modules():
            if isinstance(norm, nn.BatchNorm2d):
                norm.weight.uniform_(0.5, 1.5)
                norm.bias.uniform_(-0.5, 0.5)
                norm.running_mean.uniform_(-0.5, 0.5)
                norm.running_var.uniform_(0.5, 2.0)


class DoubleConv(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.double_conv = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
            nn.Conv2d(out_channels, out_channels, kernel_size=3, padding=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )

    def forward(self, x):
        return self.double_conv(x)


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.up = nn.ConvTranspose2d(in_channels, in_channels // 2, kernel_size=2, stride=2)
        self.conv = DoubleConv(in_channels // 2 + out_channels, out_channels)
        load_trained_statistics(self)
        self.to(torch.bfloat16)

    def forward(self, x1, x2):
        x1 = self.up(x1)
        x = torch.cat([x2, x1], dim=1)
        return self.conv(x)


def get_inputs():
    return [
        torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE, dtype=torch.bfloat16),
        torch.randn(BATCH, OUT_CHANNELS, 2 * SIZE, 2 * SIZE, dtype=torch.bfloat16),
    ]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
