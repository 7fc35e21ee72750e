"""RNN: one step of nn.GRUCell(1024 -> 2048) for 4096 sequences in float32 (17 MB input, 34 MB hidden state in and
out), as a decoder loop calls it once per token.

Two GEMMs (input and hidden, 155 GFLOP together) and the gates' sigmoid/tanh mix, which eager runs in one fused
kernel of its own.
"""

import torch
import torch.nn as nn

CATEGORY = "rnn"

BATCH = 4096
INPUT_SIZE = 1024
HIDDEN_SIZE = 2048


class Model(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.cell = nn.GRUCell(input_size, hidden_size)

    def forward(self, x, hx):
        return self.cell(x, hx)


def get_inputs():
    return [torch.randn(BATCH, INPUT_SIZE), torch.randn(BATCH, HIDDEN_SIZE)]


def get_init_inputs():
    return [INPUT_SIZE, HIDDEN_SIZE]
