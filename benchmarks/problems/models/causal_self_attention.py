"""Transformer: GPT-style causal self-attention: one fused QKV projection, split into 16 heads,
F.scaled_dot_product_attention(is_causal=True), heads merged and an output projection; 8 sequences x 2048 tokens
x 1024 hidden in bfloat16 (34 MB in and out, 101 MB for q, k, v).

Two GEMMs around flash attention; the head split and merge are transposes eager materialises with contiguous().
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "transformer"

BATCH = 8
SEQUENCE = 2048
HIDDEN = 1024
HEADS = 16


class Model(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        assert hidden % heads == 0
        self.n_head = heads
        self.c_attn = nn.Linear(hidden, 3 * hidden, dtype=torch.bfloat16)
        self.c_proj = nn.Linear(hidden, hidden, dtype=torch.bfloat16)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(C, dim=2)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


def get_inputs():
    return [torch.randn(BATCH, SEQUENCE, HIDDEN, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HIDDEN, HEADS]
