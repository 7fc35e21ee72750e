"""CNN: a MobileNet-v1 depthwise separable block: depthwise 3x3 convolution (groups = channels) -> BN -> ReLU,
then pointwise 1x1 convolution -> BN -> ReLU, 256 -> 512 channels on 64 x 256 x 28 x 28 float32 feature maps
(51 MB in, 103 MB out).

The depthwise convolution is memory-bound (9 multiply-adds per element read), a case where cuDNN is weak.
"""

import torch
import torch.nn as nn

CATEGORY = "cnn"

BATCH = 64
IN_CHANNELS = 256
OUT_CHANNELS = 512
SIZE = 28


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


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.depthwise = nn.Sequential(
            nn.Conv2d(in_channels, in_channels, kernel_size=3, padding=1, groups=in_channels, bias=False),
            nn.BatchNorm2d(in_channels),
            nn.ReLU(inplace=True),
        )
        self.pointwise = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=1, bias=False),
            nn.BatchNorm2d(out_channels),
            nn.ReLU(inplace=True),
        )
        load_trained_statistics(self)

    def forward(self, x):
        x = self.depthwise(x)
        x = self.pointwise(x)
        return x


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
