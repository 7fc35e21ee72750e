"""Composite ops that export keeps whole, opened after export into ops the compiler has templates for: recurrent cells
(`nn.GRUCell`, `nn.LSTMCell`, `nn.RNNCell`) into their matmuls and gate maths, `prelu` into a select by sign.

The formulas are PyTorch's (aten/src/ATen/native/RNN.cpp, Activation.cpp), checked against the ops themselves in
tests/worker/test_composite_ops.py; export's own tracing of them gives the graph its shapes and names.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

aten = torch.ops.aten


def _gru_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    input_reset, input_update, input_new = F.linear(input, w_ih, b_ih).chunk(3, 1)
    hidden_reset, hidden_update, hidden_new = F.linear(hx, w_hh, b_hh).chunk(3, 1)
    reset = torch.sigmoid(input_reset + hidden_reset)
    update = torch.sigmoid(input_update + hidden_update)
    new = torch.tanh(input_new + reset * hidden_new)
    return new + update * (hx - new)


def _lstm_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    hidden, cell = hx
    gates = F.linear(input, w_ih, b_ih) + F.linear(hidden, w_hh, b_hh)
    in_gate, forget_gate, cell_gate, out_gate = gates.chunk(4, 1)
    new_cell = torch.sigmoid(forget_gate) * cell + torch.sigmoid(in_gate) * torch.tanh(cell_gate)
    return torch.sigmoid(out_gate) * torch.tanh(new_cell), new_cell


def _rnn_tanh_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return torch.tanh(F.linear(input, w_ih, b_ih) + F.linear(hx, w_hh, b_hh))


def _rnn_relu_cell(input, hx, w_ih, w_hh, b_ih=None, b_hh=None):
    return torch.relu(F.linear(input, w_ih, b_ih) + F.linear(hx, w_hh, b_hh))


def _prelu(input, weight):
    # the channels are dim 1 (a 1-d or 0-d input has one channel, so one weight); a weight per channel broadcasts
    # over the dims after it, a single weight over everything (the result keeps the input's shape, 0-d included)
    shape = [] if weight.numel() == 1 else [weight.numel()] + [1] * (input.dim() - 2)
    return torch.where(input > 0, input, weight.reshape(shape) * input)


OPENED_COMPOSITES = {
    aten.gru_cell.default: _gru_cell,
    aten.lstm_cell.default: _lstm_cell,
    aten.rnn_tanh_cell.default: _rnn_tanh_cell,
    aten.rnn_relu_cell.default: _rnn_relu_cell,
    aten.prelu.default: _prelu,
}


def has_composites_to_open(graph: torch.fx.Graph) -> bool:
    return any(node.op == "call_function" and node.target in OPENED_COMPOSITES for node in graph.nodes)


def open_composite_ops(exported: Any) -> Any:
    """`exported` (an ExportedProgram) with every op of OPENED_COMPOSITES replaced by what it computes, in ops the
    compiler knows; the same program when it has none."""
    if not has_composites_to_open(exported.graph):
        return exported
    return exported.run_decompositions(OPENED_COMPOSITES)
