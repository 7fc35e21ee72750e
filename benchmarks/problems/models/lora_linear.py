"""GEMM: a LoRA-adapted linear layer: the frozen base Linear(4096 -> 4096) plus the low-rank path
lora_B(lora_A(dropout(x))) * (alpha / r) with rank 16; 4096 tokens of float32 (67 MB in and out).

137 GFLOP in the base GEMM; the rank-16 path is two thin GEMMs whose result is added in the epilogue.
"""

import math

import torch
import torch.nn as nn

CATEGORY = "gemm"

TOKENS = 4096
IN_FEATURES = 4096
OUT_FEATURES = 4096
RANK = 16


class Model(nn.Module):
    def __init__(self, in_features, out_features, r, lora_alpha, lora_dropout):
        super().__init__()
        self.base_layer = nn.Linear(in_features, out_features)
        self.lora_dropout = nn.Dropout(p=lora_dropout)
        self.lora_A = nn.Linear(in_features, r, bias=False)
        self.lora_B = nn.Linear(r, out_features, bias=False)
        self.scaling = lora_alpha / r
        nn.init.kaiming_uniform_(self.lora_A.weight, a=math.sqrt(5))
        # Trained adapters are non-zero (a fresh LoRA's B is zero, which would make the path vanish).
        nn.init.normal_(self.lora_B.weight, std=0.02)

    def forward(self, x):
        result = self.base_layer(x)
        result = result + self.lora_B(self.lora_A(self.lora_dropout(x))) * self.scaling
        return result


def get_inputs():
    return [torch.randn(TOKENS, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, RANK, 32, 0.05]
