"""LayerNorm followed by a gated activation, as in a modern transformer's pre-norm path.

The normalization stays in PyTorch; the affine modulation, SiLU gate and clamp fuse into one kernel.
"""

import torch
import torch.nn as nn

BATCH = 16
SEQUENCE = 512
WIDTH = 2048


class NormGate(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.norm = nn.LayerNorm(width, elementwise_affine=False)
        self.shift = nn.Parameter(torch.randn(width) * 0.1)
        self.scale = nn.Parameter(1.0 + torch.randn(width) * 0.1)

    def forward(self, x: torch.Tensor, gate: torch.Tensor) -> torch.Tensor:
        y = self.norm(x) * self.scale + self.shift
        y = y * torch.sigmoid(gate)
        return torch.clamp(torch.nn.functional.silu(y), min=-4.0, max=4.0)


def get_inputs():
    return [torch.randn(BATCH, SEQUENCE, WIDTH), torch.randn(BATCH, SEQUENCE, WIDTH)]


def get_init_inputs():
    return [WIDTH]
