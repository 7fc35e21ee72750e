"""CNN: a ResNet-18/34 basic block (conv-BN-ReLU, conv-BN, `out += identity`, ReLU, all in place where ResNet
does it), 64 channels on 64 x 64 x 56 x 56 float32 feature maps (51 MB in, 51 MB out).

Two 3x3 convolutions; batch norms, the residual add and both ReLUs are memory passes around them.
"""

import torch
import torch.nn as nn

CATEGORY = "cnn"

BATCH = 64
CHANNELS = 64
SIZE = 56


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
    def __init__(self, channels):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(channels)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(channels)
        load_trained_statistics(self)

    def forward(self, x):
        identity = x

        out = self.conv1(x)
        out = self.bn1(out)
        out = self.relu(out)

        out = self.conv2(out)
        out = self.bn2(out)

        out += identity
        out = self.relu(out)
        return out


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [CHANNELS]
