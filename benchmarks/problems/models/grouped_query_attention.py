"""Transformer: Llama-style grouped-query attention: q/k/v projections (32 query heads, 8 key/value heads of
128), keys and values repeated to the query heads with repeat_interleave, causal
F.scaled_dot_product_attention, output projection; 4 x 2048 tokens x 4096 hidden in bfloat16 (67 MB in and out).

About 0.8 TFLOP: four GEMMs (0.69 TFLOP) and causal attention; the repeat is a copy eager makes and a kernel can
index instead.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "transformer"

BATCH = 4
SEQUENCE = 2048
HEADS = 32
KV_HEADS = 8
HEAD_DIM = 128


class Model(nn.Module):
    def __init__(self, num_heads, num_key_value_heads, head_dim):
        super().__init__()
        hidden_size = num_heads * head_dim
        self.num_heads = num_heads
        self.num_key_value_heads = num_key_value_heads
        self.head_dim = head_dim
        self.q_proj = nn.Linear(hidden_size, num_heads * head_dim, bias=False, dtype=torch.bfloat16)
        self.k_proj = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=False, dtype=torch.bfloat16)
        self.v_proj = nn.Linear(hidden_size, num_key_value_heads * head_dim, bias=False, dtype=torch.bfloat16)
        self.o_proj = nn.Linear(num_heads * head_dim, hidden_size, bias=False, dtype=torch.bfloat16)

    def forward(self, hidden_states):
        bsz, q_len, _ = hidden_states.size()
        query_states = self.q_proj(hidden_states).view(bsz, q_len, self.num_heads, self.head_dim).transpose(1, 2)
        key_states = self.k_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim)
        value_states = self.v_proj(hidden_states).view(bsz, q_len, self.num_key_value_heads, self.head_dim)
        key_states = key_states.transpose(1, 2)
        value_states = value_states.transpose(1, 2)

        # Each key/value head serves num_heads / num_key_value_heads consecutive query heads.
        groups = self.num_heads // self.num_key_value_heads
        key_states = key_states.repeat_interleave(groups, dim=1)
        value_states = value_states.repeat_interleave(groups, dim=1)

        attn_output = F.scaled_dot_product_attention(query_states, key_states, value_states, is_causal=True)
        attn_output = attn_output.transpose(1, 2).contiguous().reshape(bsz, q_len, -1)
        return self.o_proj(attn_output)


def get_inputs():
    return [torch.randn(BATCH, SEQUENCE, HEADS * HEAD_DIM, dtype=torch.bfloat16)]


def get_init_inputs():
    return [HEADS, KV_HEADS, HEAD_DIM]
