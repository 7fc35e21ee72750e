"""CNN: a stride-2 "ConvBNAct" downsampling block as in YOLO and EfficientNet backbones: Conv2d(3x3, stride 2,
no bias) -> BatchNorm2d -> SiLU(inplace=True), 128 -> 256 channels on 64 x 128 x 112 x 112 bfloat16 images
(205 MB in, 103 MB out).

The whole module is cast with `.to(torch.bfloat16)` at the end of its constructor, as a model loaded for bf16
inference is.
"""

import torch
import torch.nn as nn

CATEGORY = "cnn"

BATCH = 64
IN_CHANNELS = 128
OUT_CHANNELS = 256
SIZE = 112


def load_trained_statistics(norm):
    """Give the norm the scale, shift and running statistics a trained checkpoint has (fresh ones make it an
    identity, which would hide a kernel that skips it)."""
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
        norm.bias.uniform_(-0.5, 0.5)
        norm.running_mean.uniform_(-0.5, 0.5)
        norm.running_var.uniform_(0.5, 2.0)


class ConvBNAct(nn.Module):
    def __init__(self, in_channels, out_channels, kernel_size, stride):
        super().__init__()
        self.conv = nn.Conv2d(
            in_channels, out_channels, kernel_size, stride=stride, padding=kernel_size // 2, bias=False
        )
        self.bn = nn.BatchNorm2d(out_channels, eps=1e-3, momentum=0.03)
        self.act = nn.SiLU(inplace=True)

    def forward(self, x):
        return self.act(self.bn(self.conv(x)))


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.block = ConvBNAct(in_channels, out_channels, kernel_size=3, stride=2)
        load_trained_statistics(self.block.bn)
        self.to(torch.bfloat16)

    def forward(self, x):
        return self.block(x)


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE, dtype=torch.bfloat16)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
