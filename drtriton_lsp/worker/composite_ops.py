"""Ops that export keeps whole and the compiler has no template for, opened after export into ops it has: recurrent
cells (`nn.GRUCell`, `nn.LSTMCell`, `nn.RNNCell`) into their matmuls and gate maths; `prelu` and `glu` (and, by
PyTorch's own decompositions, `hardshrink` and `softshrink`) into pointwise ops; `baddbmm` into a `bmm` and its
epilogue; `var_mean` into a `var` and a `mean`.

The formulas are PyTorch's (aten/src/ATen/native: RNN.cpp, Activation.cpp, ...), checked against the ops themselves
in tests/worker/test_composite_ops.py, NaN included; export's own tracing of them gives the graph its shapes and names.
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
    # PyTorch adds the two projections, then chunks; chunking first gives each gate the same sum, and leaves no
    # whole-width add between the GEMMs and the gate maths: the adds fuse into the gate kernel (one pointwise kernel
    # per step, as eager's fused cell), where the add before a split was a kernel of its own (0.80x eager on the H200)
    hidden, cell = hx
    input_gates = F.linear(input, w_ih, b_ih).chunk(4, 1)
    hidden_gates = F.linear(hidden, w_hh, b_hh).chunk(4, 1)
    in_gate, forget_gate, cell_gate, out_gate = (x + h for x, h in zip(input_gates, hidden_gates))
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


def _glu(input, dim=-1):
    value, gate = input.chunk(2, dim)
    return value * torch.sigmoid(gate)


def _baddbmm(input, batch1, batch2, *, beta=1, alpha=1):
    product = torch.bmm(batch1, batch2)
    if alpha != 1:
        product = product * alpha
    if beta == 0:  # PyTorch never reads the input then (a NaN there stays out)
        return product
    return product + (input if beta == 1 else input * beta)


def _var_mean_dim(input, dim=None, unbiased=True, keepdim=False):
    return _var_mean_correction(input, dim, correction=1 if unbiased else 0, keepdim=keepdim)


def _var_mean_correction(input, dim=None, *, correction=None, keepdim=False):
    # the same values for finite inputs; with an infinity, PyTorch's one-pass var_mean gives a NaN or an infinite mean
    # depending on where it is (CPU and GPU differ), this the infinite mean the values have
    dims = list(range(input.dim())) if dim is None else dim
    variance = torch.var(input, dims, correction=1 if correction is None else correction, keepdim=keepdim)
    return variance, torch.mean(input, dims, keepdim=keepdim)


OPENED_COMPOSITES = {
    aten.gru_cell.default: _gru_cell,
    aten.lstm_cell.default: _lstm_cell,
    aten.rnn_tanh_cell.default: _rnn_tanh_cell,
    aten.rnn_relu_cell.default: _rnn_relu_cell,
    aten.prelu.default: _prelu,
    aten.glu.default: _glu,
    aten.baddbmm.default: _baddbmm,
    aten.var_mean.dim: _var_mean_dim,
    aten.var_mean.correction: _var_mean_correction,
}


# Ops that PyTorch's own decompositions open whenever run_decompositions runs (they win over a table entry), into
# pointwise ops that keep PyTorch's NaN semantics: `where(abs(x) <= lambd, 0, x)` and `where(abs(x) > lambd, x -
# sign(x) * lambd, x * 0)`. Their presence alone is reason to run it.
OPENED_BY_PYTORCH = frozenset({aten.hardshrink.default, aten.softshrink.default})


def has_composites_to_open(graph: torch.fx.Graph) -> bool:
    return any(
        node.op == "call_function" and (node.target in OPENED_COMPOSITES or node.target in OPENED_BY_PYTORCH)
        for node in graph.nodes
    )


def open_composite_ops(exported: Any) -> Any:
    """`exported` (an ExportedProgram) with every op of OPENED_COMPOSITES and OPENED_BY_PYTORCH replaced by what it
    computes, in ops the compiler knows; the same program when it has none."""
    if not has_composites_to_open(exported.graph):
        return exported
    return exported.run_decompositions(OPENED_COMPOSITES)
