"""Transformer: Stable-Diffusion-style cross-attention written with einsum: image tokens attend to a 77-token text
context; q from 320-wide latents, k and v from 768-wide text states, 8 heads of 40, softmax, einsum back,
heads merged, output Linear; 8 x 4096 x 320 float32 latents (42 MB in and out), 8 x 77 x 768 context (1.9 MB).

The 8 x 8 x 4096 x 77 attention matrix (81 MB) is narrow: a fused kernel keeps each row's 77 scores in registers.
"""

import torch
import torch.nn as nn

CATEGORY = "transformer"

BATCH = 8
TOKENS = 4096
QUERY_DIM = 320
CONTEXT_TOKENS = 77
CONTEXT_DIM = 768
HEADS = 8


class Model(nn.Module):
    def __init__(self, query_dim, context_dim, heads, dim_head):
        super().__init__()
        inner_dim = heads * dim_head
        self.scale = dim_head**-0.5
        self.heads = heads
        self.to_q = nn.Linear(query_dim, inner_dim, bias=False)
        self.to_k = nn.Linear(context_dim, inner_dim, bias=False)
        self.to_v = nn.Linear(context_dim, inner_dim, bias=False)
        self.to_out = nn.Sequential(nn.Linear(inner_dim, query_dim), nn.Dropout(0.0))

    def forward(self, x, context):
        h = self.heads
        q = self.to_q(x)
        k = self.to_k(context)
        v = self.to_v(context)

        b, n, _ = q.shape

        def split_heads(t):  # (b, tokens, h * d) -> (b * h, tokens, d)
            return t.reshape(b, t.shape[1], h, -1).permute(0, 2, 1, 3).reshape(b * h, t.shape[1], -1)

        q, k, v = split_heads(q), split_heads(k), split_heads(v)

        sim = torch.einsum("b i d, b j d -> b i j", q, k) * self.scale
        attn = sim.softmax(dim=-1)
        out = torch.einsum("b i j, b j d -> b i d", attn, v)

        out = out.reshape(b, h, n, -1).permute(0, 2, 1, 3).reshape(b, n, -1)
        return self.to_out(out)


def get_inputs():
    return [torch.randn(BATCH, TOKENS, QUERY_DIM), torch.randn(BATCH, CONTEXT_TOKENS, CONTEXT_DIM)]


def get_init_inputs():
    return [QUERY_DIM, CONTEXT_DIM, HEADS, QUERY_DIM // HEADS]
