"""GEMM: a highway layer: h = relu(W_h x + b_h), t = sigmoid(W_t x + b_t), y = h * t + x * (1 - t); 8192 tokens x
2048 features in bfloat16 (34 MB in and out).

Two 69 GFLOP GEMMs over the same input whose results meet in one elementwise gate: fusable as one GEMM with a
concatenated weight and the gate in its epilogue.
"""

import torch
import torch.nn as nn

CATEGORY = "gemm"

TOKENS = 8192
FEATURES = 2048


class Model(nn.Module):
    def __init__(self, size, gate_bias):
        super().__init__()
        self.nonlinear = nn.Linear(size, size)
        self.gate = nn.Linear(size, size)
        # A negative gate bias starts the layer close to carrying its input through, as the highway paper advises.
        nn.init.constant_(self.gate.bias, gate_bias)
        self.to(torch.bfloat16)

    def forward(self, x):
        h = torch.relu(self.nonlinear(x))
        t = torch.sigmoid(self.gate(x))
        return h * t + x * (1 - t)


def get_inputs():
    return [torch.randn(TOKENS, FEATURES, dtype=torch.bfloat16)]


def get_init_inputs():
    return [FEATURES, -1.0]
