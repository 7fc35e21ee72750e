"""RNN: nn.LSTMCell(512 -> 1024) unrolled in a Python loop over 16 time steps, collecting every hidden state;
512 sequences in float32 (17 MB of inputs, 34 MB of stacked outputs).

16 dependent steps of two GEMMs each (103 GFLOP in all); the input projections of all steps are independent of
the recurrence and could run as one GEMM up front.
"""

import torch
import torch.nn as nn

CATEGORY = "rnn"

STEPS = 16
BATCH = 512
INPUT_SIZE = 512
HIDDEN_SIZE = 1024


class Model(nn.Module):
    def __init__(self, input_size, hidden_size):
        super().__init__()
        self.hidden_size = hidden_size
        self.cell = nn.LSTMCell(input_size, hidden_size)

    def forward(self, inputs):
        h = inputs.new_zeros(inputs.size(1), self.hidden_size)
        c = inputs.new_zeros(inputs.size(1), self.hidden_size)
        outputs = []
        for x in inputs.unbind(0):
            h, c = self.cell(x, (h, c))
            outputs.append(h)
        return torch.stack(outputs)


def get_inputs():
    return [torch.randn(STEPS, BATCH, INPUT_SIZE)]


def get_init_inputs():
    return [INPUT_SIZE, HIDDEN_SIZE]
