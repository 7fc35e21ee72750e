"""Transformer: a Llama MLP: down_proj(silu(gate_proj(x)) * up_proj(x)), 2048 -> 5632 -> 2048 without biases,
on 4096 tokens of bfloat16 (17 MB in and out, 46 MB per intermediate).

283 GFLOP in three GEMMs; the SiLU and the gating multiply are the epilogue of the first two.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "transformer"

TOKENS = 4096
HIDDEN = 2048
INTERMEDIATE = 5632


class Model(nn.Module):
    def __init__(self, hidden_size, intermediate_size):
        super().__init__()
        self.gate_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.up_proj = nn.Linear(hidden_size, intermediate_size, bias=False)
        self.down_proj = nn.Linear(intermediate_size, hidden_size, bias=False)
        self.to(torch.bfloat16)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN, INTERMEDIATE]
