"""Transformer: one decoding step of attention over a KV cache: a single query per head against 4096 cached keys
and values, softmax in float32 and cast back; 16 sequences x 32 heads x 128 in bfloat16, caches of
16 x 32 x 4096 x 128 (537 MB each, 1.07 GB read per step).

Purely memory-bound: a matrix-vector product per head, twice; the ceiling is the copy bandwidth.
"""

import math

import torch
import torch.nn as nn

CATEGORY = "transformer"

BATCH = 16
HEADS = 32
CACHE_LENGTH = 4096
HEAD_DIM = 128


class Model(nn.Module):
    def __init__(self, head_dim):
        super().__init__()
        self.scaling = 1.0 / math.sqrt(head_dim)

    def forward(self, query_states, key_states, value_states):
        attn_weights = torch.matmul(query_states, key_states.transpose(2, 3)) * self.scaling
        attn_weights = nn.functional.softmax(attn_weights, dim=-1, dtype=torch.float32).to(query_states.dtype)
        return torch.matmul(attn_weights, value_states)


def get_inputs():
    cache = (BATCH, HEADS, CACHE_LENGTH, HEAD_DIM)
    return [
        torch.randn(BATCH, HEADS, 1, HEAD_DIM, dtype=torch.bfloat16),
        torch.randn(cache, dtype=torch.bfloat16),
        torch.randn(cache, dtype=torch.bfloat16),
    ]


def get_init_inputs():
    return [HEAD_DIM]
