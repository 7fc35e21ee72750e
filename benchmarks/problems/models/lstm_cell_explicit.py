"""RNN: an LSTM cell written out: gates = x W_ih^T + b_ih + h W_hh^T + b_hh, chunked into input/forget/cell/output
gates, sigmoid and tanh, c' = f * c + i * g, h' = o * tanh(c'); 4096 sequences, 1024 -> 2048 in bfloat16 (8 MB input,
17 MB per state; 42 MB in, 34 MB out).

Two GEMMs (206 GFLOP) and a pointwise tail over the 4 x 2048-wide gates that eager runs as about ten kernels.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F

CATEGORY = "rnn"

BATCH = 4096
INPUT_SIZE = 1024
HIDDEN_SIZE = 2048


class Model(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        bound = 1.0 / math.sqrt(hidden_size)

        def uniform(*shape):
            return nn.Parameter(torch.empty(*shape, dtype=torch.bfloat16).uniform_(-bound, bound))

        self.weight_ih = uniform(4 * hidden_size, input_size)
        self.weight_hh = uniform(4 * hidden_size, hidden_size)
        self.bias_ih = uniform(4 * hidden_size)
        self.bias_hh = uniform(4 * hidden_size)

    def forward(self, input, hx, cx):
        gates = F.linear(input, self.weight_ih, self.bias_ih) + F.linear(hx, self.weight_hh, self.bias_hh)
        ingate, forgetgate, cellgate, outgate = gates.chunk(4, 1)

        ingate = torch.sigmoid(ingate)
        forgetgate = torch.sigmoid(forgetgate)
        cellgate = torch.tanh(cellgate)
        outgate = torch.sigmoid(outgate)

        cy = (forgetgate * cx) + (ingate * cellgate)
        hy = outgate * torch.tanh(cy)
        return hy, cy


def get_inputs():
    return [
        torch.randn(BATCH, INPUT_SIZE, dtype=torch.bfloat16),
        torch.randn(BATCH, HIDDEN_SIZE, dtype=torch.bfloat16),
        torch.randn(BATCH, HIDDEN_SIZE, dtype=torch.bfloat16),
    ]


def get_init_inputs():
    return [INPUT_SIZE, HIDDEN_SIZE]
