"""CNN: a ConvNeXt block: depthwise 7x7 convolution, permute to channels-last, LayerNorm, Linear 4x expansion,
GELU, Linear back, a learned per-channel layer scale, permute back and the residual add; 96 channels on
128 x 96 x 56 x 56 bfloat16 images (77 MB in and out, 308 MB for the expanded activation).

Parameters are created in bfloat16 through the layers' `dtype=` argument.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "cnn"

BATCH = 128
CHANNELS = 96
SIZE = 56


class Model(nn.Module):
    def __init__(self, dim, layer_scale_init):
        super().__init__()
        dtype = torch.bfloat16
        self.dwconv = nn.Conv2d(dim, dim, kernel_size=7, padding=3, groups=dim, dtype=dtype)
        self.norm = nn.LayerNorm(dim, eps=1e-6, dtype=dtype)
        self.pwconv1 = nn.Linear(dim, 4 * dim, dtype=dtype)
        self.pwconv2 = nn.Linear(4 * dim, dim, dtype=dtype)
        self.gamma = nn.Parameter(layer_scale_init * torch.ones(dim, dtype=dtype))
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, x):
        shortcut = x
        x = self.dwconv(x)
        x = x.permute(0, 2, 3, 1)  # (N, C, H, W) -> (N, H, W, C)
        x = self.norm(x)
        x = self.pwconv1(x)
        x = F.gelu(x)
        x = self.pwconv2(x)
        x = self.gamma * x
        x = x.permute(0, 3, 1, 2)
        return shortcut + x


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, SIZE, SIZE, dtype=torch.bfloat16)]


def get_init_inputs():
    return [CHANNELS, 0.5]
