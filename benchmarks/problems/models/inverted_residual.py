"""CNN: a MobileNetV2 inverted residual block with its shortcut: 1x1 expansion (x6) -> BN -> ReLU6, depthwise
3x3 -> BN -> ReLU6, 1x1 projection -> BN, plus the input; 32 channels (192 expanded) on 64 x 32 x 56 x 56 float32
feature maps (26 MB in and out, 154 MB per expanded activation).
"""

import torch
import torch.nn as nn

CATEGORY = "cnn"

BATCH = 64
CHANNELS = 32
SIZE = 56
EXPAND_RATIO = 6


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
    def __init__(self, channels, expand_ratio):
        super().__init__()
        hidden = channels * expand_ratio
        self.conv = nn.Sequential(
            nn.Conv2d(channels, hidden, 1, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, hidden, 3, padding=1, groups=hidden, bias=False),
            nn.BatchNorm2d(hidden),
            nn.ReLU6(inplace=True),
            nn.Conv2d(hidden, channels, 1, bias=False),
            nn.BatchNorm2d(channels),
        )
        load_trained_statistics(self)

    def forward(self, x):
        return x + self.conv(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS, EXPAND_RATIO]
