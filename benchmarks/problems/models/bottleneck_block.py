"""CNN: the first bottleneck block of ResNet-50's second stage (v1.5: the stride sits on the 3x3 convolution),
256 -> 128 -> 128 -> 512 channels with a strided 1x1 projection shortcut, on 32 x 256 x 56 x 56 float32 feature
maps (103 MB in, 51 MB out).

Four convolutions, four batch norms, a residual add and three in-place ReLUs.
"""

import torch
import torch.nn as nn

CATEGORY = "cnn"

BATCH = 32
IN_CHANNELS = 256
WIDTH = 128
SIZE = 56
EXPANSION = 4


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
    def __init__(self, in_channels, width, stride, expansion):
        super().__init__()
        out_channels = width * expansion
        self.conv1 = nn.Conv2d(in_channels, width, kernel_size=1, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.conv2 = nn.Conv2d(width, width, kernel_size=3, stride=stride, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(width)
        self.conv3 = nn.Conv2d(width, out_channels, kernel_size=1, bias=False)
        self.bn3 = nn.BatchNorm2d(out_channels)
        self.relu = nn.ReLU(inplace=True)
        self.downsample = nn.Sequential(
            nn.Conv2d(in_channels, out_channels, kernel_size=1, stride=stride, bias=False),
            nn.BatchNorm2d(out_channels),
        )
        load_trained_statistics(self)

    def forward(self, x):
        identity = self.downsample(x)

        out = self.relu(self.bn1(self.conv1(x)))
        out = self.relu(self.bn2(self.conv2(out)))
        out = self.bn3(self.conv3(out))

        out += identity
        return self.relu(out)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, WIDTH, 2, EXPANSION]
