"""CNN: the ResNet stem: Conv2d(3 -> 64, 7x7, stride 2) -> BatchNorm2d -> ReLU(inplace=True) -> MaxPool2d(3, stride 2),
on 64 x 3 x 224 x 224 float32 images (39 MB in, 205 MB after the convolution, 51 MB out).

Three input channels make the convolution a poor fit for tensor cores; the pool reads the full-size activation.
"""

import torch
import torch.nn as nn

CATEGORY = "cnn"

BATCH = 64
IMAGE = 224
WIDTH = 64


def load_trained_statistics(norm):
    """Give the norm the scale, shift and running statistics a trained checkpoint has (fresh ones make it an
    identity, which would hide a kernel that skips it)."""
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
        norm.running_mean.uniform_(-0.5, 0.5)
        norm.running_var.uniform_(0.5, 2.0)


class Model(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.conv1 = nn.Conv2d(3, width, kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(width)
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        load_trained_statistics(self.bn1)

    def forward(self, x):
        x = self.conv1(x)
        x = self.bn1(x)
        x = self.relu(x)
        x = self.maxpool(x)
        return x


def get_inputs():
    return [torch.randn(BATCH, 3, IMAGE, IMAGE)]


def get_init_inputs():
    return [WIDTH]
