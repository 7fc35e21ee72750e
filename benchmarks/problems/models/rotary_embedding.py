"""Transformer: rotary position embedding applied to queries and keys (rotate_half form, cos/sin tables as
buffers), 8 x 32 heads x 2048 positions x 128 in bfloat16 (134 MB per tensor; 268 MB in, 268 MB out).

Eager builds rotate_half's negated, concatenated copy and runs four multiplies and two adds per tensor.
"""

import torch
import torch.nn as nn

CATEGORY = "transformer"

BATCH = 8
HEADS = 32
SEQUENCE = 2048
HEAD_DIM = 128
MAX_POSITIONS = 4096


def rotate_half(x):
    """(x1, x2) -> (-x2, x1) over the last dimension: the 90-degree turn of each (i, i + d/2) pair."""
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2 :]
    return torch.cat((-x2, x1), dim=-1)


class Model(nn.Module):
    def __init__(self, head_dim, max_positions, base):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, head_dim, 2, dtype=torch.float32) / head_dim))
        positions = torch.arange(max_positions, dtype=torch.float32)
        freqs = torch.outer(positions, inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        self.register_buffer("cos_cached", emb.cos().to(torch.bfloat16), persistent=False)
        self.register_buffer("sin_cached", emb.sin().to(torch.bfloat16), persistent=False)

    def forward(self, q, k):
        seq_len = q.shape[-2]
        cos = self.cos_cached[:seq_len]
        sin = self.sin_cached[:seq_len]
        q_embed = (q * cos) + (rotate_half(q) * sin)
        k_embed = (k * cos) + (rotate_half(k) * sin)
        return q_embed, k_embed


def get_inputs():
    shape = (BATCH, HEADS, SEQUENCE, HEAD_DIM)
    return [torch.randn(shape, dtype=torch.bfloat16), torch.randn(shape, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HEAD_DIM, MAX_POSITIONS, 10000.0]
