"""Transformer: BERT's attention output sub-layer (post-norm): dense projection, dropout, then LayerNorm of it
plus the sub-layer's input; 32 x 512 tokens x 1024 hidden in float32 (67 MB per tensor; 134 MB in, 67 MB out).

A 34 GFLOP GEMM followed by a bias, a residual add and a row normalisation that eager runs as separate passes.
"""

import torch
import torch.nn as nn

CATEGORY = "transformer"

BATCH = 32
SEQUENCE = 512
HIDDEN = 1024


class Model(nn.Module):
    def __init__(self, hidden_size, layer_norm_eps, hidden_dropout_prob):
        super().__init__()
        self.dense = nn.Linear(hidden_size, hidden_size)
        self.LayerNorm = nn.LayerNorm(hidden_size, eps=layer_norm_eps)
        self.dropout = nn.Dropout(hidden_dropout_prob)
        with torch.no_grad():
            self.LayerNorm.weight.uniform_(0.5, 1.5)
            self.LayerNorm.bias.uniform_(-0.5, 0.5)

    def forward(self, hidden_states, input_tensor):
        hidden_states = self.dense(hidden_states)
        hidden_states = self.dropout(hidden_states)
        hidden_states = self.LayerNorm(hidden_states + input_tensor)
        return hidden_states


def get_inputs():
    return [torch.randn(BATCH, SEQUENCE, HIDDEN), torch.randn(BATCH, SEQUENCE, HIDDEN)]


def get_init_inputs():
    return [HIDDEN, 1e-12, 0.1]
