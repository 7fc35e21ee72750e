"""A transformer-style MLP block: linear, bias, GELU, linear, scaled residual.

The two matmuls stay in PyTorch (cuBLAS); drtriton fuses the bias + GELU and the
scale + residual epilogues into Triton kernels.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

HIDDEN = 1024
EXPANSION = 4
TOKENS = 8192


class MLPBlock(nn.Module):
    def __init__(self, hidden: int, expansion: int):
        super().__init__()
        self.up = nn.Linear(hidden, hidden * expansion, bias=False)
        self.up_bias = nn.Parameter(torch.zeros(hidden * expansion))
        self.down = nn.Linear(hidden * expansion, hidden)
        self.residual_scale = nn.Parameter(torch.full((hidden,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.gelu(self.up(x) + self.up_bias)
        return x + self.residual_scale * self.down(h)


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, EXPANSION]
