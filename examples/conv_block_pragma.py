"""An ordinary convolution block, written without KernelBench helpers.

Its example inputs come from the `# drtriton:` comments above the class. The convolution
and batch norm stay in PyTorch; the Hardswish-and-residual epilogue becomes a Triton kernel.
"""

import torch
from torch import nn


# drtriton: inputs = [torch.randn(8, 32, 56, 56)]
# drtriton: init = [32]
class ConvBlock(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, kernel_size=3, padding=1, bias=False)
        self.norm = nn.BatchNorm2d(channels)
        self.act = nn.Hardswish()

    def forward(self, x):
        return x + 0.5 * self.act(self.norm(self.conv(x)))


if __name__ == "__main__":
    block = ConvBlock(32).eval()
    print(block(torch.randn(2, 32, 16, 16)).shape)
