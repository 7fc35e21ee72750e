"""CNN: a volumetric segmentation decoder step (nnU-Net style): ConvTranspose3d(2x2x2, stride 2) doubling each
side, InstanceNorm3d(affine) and LeakyReLU(0.01, inplace=True); 64 -> 32 channels, 2 x 64 x 32^3 float32 volumes in
(17 MB), 2 x 32 x 64^3 out (67 MB).

Instance norm reduces over each (volume, channel) pair's 262,144 voxels.
"""

import torch
import torch.nn as nn

CATEGORY = "cnn"

BATCH = 2
IN_CHANNELS = 64
OUT_CHANNELS = 32
SIZE = 32


class Model(nn.Module):
    def __init__(self, in_channels, out_channels):
        super().__init__()
        self.transp_conv = nn.ConvTranspose3d(in_channels, out_channels, kernel_size=2, stride=2, bias=False)
        self.norm = nn.InstanceNorm3d(out_channels, eps=1e-5, affine=True)
        self.nonlin = nn.LeakyReLU(negative_slope=0.01, inplace=True)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        return self.nonlin(self.norm(self.transp_conv(x)))


def get_inputs():
    return [torch.randn(BATCH, IN_CHANNELS, SIZE, SIZE, SIZE)]


def get_init_inputs():
    return [IN_CHANNELS, OUT_CHANNELS]
