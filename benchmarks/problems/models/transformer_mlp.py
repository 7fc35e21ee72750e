"""Transformer: a GPT-2/ViT feed-forward block: Linear(1024 -> 4096) -> GELU(tanh) -> Linear(4096 -> 1024) ->
dropout, on 16 x 512 tokens of float32 (34 MB in and out, 134 MB hidden).

137 GFLOP of fp32 GEMM (cuBLAS SGEMM unless TF32 is allowed); the GELU is the epilogue to fuse.
"""

import torch
import torch.nn as nn

CATEGORY = "transformer"

BATCH = 16
SEQUENCE = 512
HIDDEN = 1024
INTERMEDIATE = 4096


class Model(nn.Module):
    def __init__(self, hidden, intermediate, dropout):
        super().__init__()
        self.fc1 = nn.Linear(hidden, intermediate)
        self.act = nn.GELU(approximate="tanh")
        self.fc2 = nn.Linear(intermediate, hidden)
        self.drop = nn.Dropout(dropout)

    def forward(self, x):
        x = self.fc1(x)
        x = self.act(x)
        x = self.fc2(x)
        x = self.drop(x)
        return x


def get_inputs():
    return [torch.randn(BATCH, SEQUENCE, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, INTERMEDIATE, 0.1]
