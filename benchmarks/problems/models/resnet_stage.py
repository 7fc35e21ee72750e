"""Network: ResNet-18's second stage: a strided basic block with a 1x1 projection shortcut (64 -> 128 channels,
56 -> 28 pixels) followed by a plain basic block; 32 x 64 x 56 x 56 float32 in (26 MB), 32 x 128 x 28 x 28 out
(13 MB).

Five convolutions, five batch norms, two residual adds and in-place ReLUs: a whole stage as a torchvision-style
model defines it.
"""

import torch
import torch.nn as nn

CATEGORY = "network"

BATCH = 32
IN_CHANNELS = 64
OUT_CHANNELS = 128
SIZE = 56
BLOCKS = 2


def conv3x3(in_planes, out_planes, stride=1):
    return nn.Conv2d(in_planes, out_planes, kernel_size=3, stride=stride, padding=1, bias=False)


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


class BasicBlock(nn.Module):
    def __init__(self, inplanes, planes, stride=1, downsample=None):
        super().__init__()
        self.conv1 = conv3x3(inplanes, planes, stride)
        self.bn1 = nn.BatchNorm2d(planes)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = conv3x3(planes, planes)
        self.bn2 = nn.BatchNorm2d(planes)
        self.downsample = downsample

    def forward(self, x):
        identity = x if self.downsample is None else self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += identity
        return self.relu(out)


class Model(nn.Module):
    def __init__(self, inplanes, planes, blocks):
        super().__init__()
        downsample = nn.Sequential(
            nn.Conv2d(inplanes, planes, kernel_size=1, stride=2, bias=False),
            nn.BatchNorm2d(planes),
        )
        layers = [BasicBlock(inplanes, planes, stride=2, downsample=downsample)]
        layers += [BasicBlock(planes, planes) for _ in range(1, blocks)]
        self.layer2 = nn.Sequential(*layers)
        load_trained_statistics(self)

    def forward(self, x):
        return self.layer2(x)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS, BLOCKS]
