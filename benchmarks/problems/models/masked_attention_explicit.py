"""Transformer: scaled dot-product attention written out (the annotated-Transformer way): Q K^T / sqrt(d_k),
masked_fill of padded keys with -1e9, softmax, dropout (a no-op in eval), times V; 4 x 16 heads x 1024 x 64
float32 queries, keys and values (17 MB each) with a 4 x 1 x 1 x 1024 key-padding mask.

The 268 MB score matrix is written and read back three times in eager; a fused kernel never stores it.
"""

import math

import torch
import torch.nn as nn

CATEGORY = "transformer"

BATCH = 4
HEADS = 16
SEQUENCE = 1024
HEAD_DIM = 64


class Model(nn.Module):
    def __init__(self, dropout):
        super().__init__()
        self.dropout = nn.Dropout(p=dropout)

    def forward(self, query, key, value, mask):
        d_k = query.size(-1)
        scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(d_k)
        scores = scores.masked_fill(mask == 0, -1e9)
        p_attn = scores.softmax(dim=-1)
        p_attn = self.dropout(p_attn)
        return torch.matmul(p_attn, value)


def get_inputs():
    shape = (BATCH, HEADS, SEQUENCE, HEAD_DIM)
    mask = (torch.rand(BATCH, 1, 1, SEQUENCE) > 0.1).long()
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape), mask]


def get_init_inputs():
    return [0.1]
