"""GEMM: weight-only int8 quantised linear (per-output-channel scales), dequantised to bfloat16 on the fly:
F.linear(x, weight.to(bf16) * scale[:, None], bias); 4096 tokens x 4096 -> 11008 (an LLM's MLP), 45 MB of int8
weights, 34 MB in, 90 MB out.

Eager materialises the 90 MB dequantised weight every call; a fused kernel converts tiles as it loads them.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "gemm"

TOKENS = 4096
IN_FEATURES = 4096
OUT_FEATURES = 11008


class Model(nn.Module):
    def __init__(self, in_features, out_features):
        super().__init__()
        weight = torch.randn(out_features, in_features) / in_features**0.5
        scale = weight.abs().amax(dim=1) / 127.0
        self.register_buffer("weight", torch.round(weight / scale[:, None]).to(torch.int8))
        self.register_buffer("scale", scale.to(torch.bfloat16))
        self.bias = nn.Parameter(torch.randn(out_features, dtype=torch.bfloat16) * 0.02)

    def forward(self, x):
        weight = self.weight.to(x.dtype) * self.scale[:, None]
        return F.linear(x, weight, self.bias)


def get_inputs():
    return [torch.randn(TOKENS, IN_FEATURES, dtype=torch.bfloat16)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES]
