"""Composite ops opened after export: each formula gives what PyTorch's op gives (recurrent cells, prelu), a captured
graph holds the matmuls and pointwise ops instead of the composite, and these then run in Triton, verified (the
interpreter).
"""

from __future__ import annotations

import json
import subprocess
import sys
import warnings

import pytest
import torch
import torch.nn as nn

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.task import load_module_from_source
from drtriton_lsp.worker.capture import capture_graph
from drtriton_lsp.worker.composite_ops import OPENED_BY_PYTORCH, OPENED_COMPOSITES, open_composite_ops

aten = torch.ops.aten

CELLS = [
    (aten.gru_cell.default, lambda bias: nn.GRUCell(5, 7, bias=bias)),
    (aten.lstm_cell.default, lambda bias: nn.LSTMCell(5, 7, bias=bias)),
    (aten.rnn_tanh_cell.default, lambda bias: nn.RNNCell(5, 7, bias=bias)),
    (aten.rnn_relu_cell.default, lambda bias: nn.RNNCell(5, 7, bias=bias, nonlinearity="relu")),
]


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize(("op", "make_cell"), CELLS)
def test_each_opened_cell_computes_what_pytorchs_cell_computes(op, make_cell, bias):
    torch.manual_seed(0)
    cell = make_cell(bias).double()
    x, h, c = torch.randn(3, 5).double(), torch.randn(3, 7).double(), torch.randn(3, 7).double()
    state = (h, c) if isinstance(cell, nn.LSTMCell) else h
    weights = [cell.weight_ih, cell.weight_hh, *([cell.bias_ih, cell.bias_hh] if bias else [])]
    with torch.no_grad():
        expected = op(x, list(state) if isinstance(state, tuple) else state, *weights)
        opened = OPENED_COMPOSITES[op](x, state, *weights)
    for got, want in zip(opened if isinstance(opened, tuple) else (opened,),
                         expected if isinstance(expected, tuple) else (expected,)):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(
    ("shape", "channels"),  # an input of rank < 2 has no channel dim: one weight
    [((), 1), ((5,), 1), *[(shape, channels) for shape in [(3, 4), (2, 4, 5), (2, 4, 3, 3), (2, 4, 2, 3, 2)]
                           for channels in (1, 4)]],
)
def test_opened_prelu_computes_what_pytorchs_prelu_computes(shape, channels):
    torch.manual_seed(0)
    x = torch.randn(shape, dtype=torch.float64)
    x.view(-1)[:1] = float("nan")
    weight = torch.randn(channels, dtype=torch.float64)
    torch.testing.assert_close(OPENED_COMPOSITES[aten.prelu.default](x, weight), aten.prelu(x, weight), equal_nan=True)


def test_a_captured_prelu_is_a_select_by_sign_in_a_pointwise_kernel():
    model = nn.Sequential(nn.PReLU(8), nn.PixelShuffle(2), nn.PReLU()).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = capture_graph(model, (torch.randn(2, 8, 4, 4),))
    ops = [node.op for node in graph.nodes]
    assert "aten.prelu.default" not in ops and "aten.where.self" in ops
    program = compile_graph(graph, prefix="prelu", forward_params=["input"], has_self=True)
    assert "aten.where.self" in program.replaced_ops


def special_values(shape) -> torch.Tensor:
    """Random float64 values with a NaN, both infinities and 0.5, -0.5 (a shrink op's interval ends) among them."""
    x = torch.randn(shape, dtype=torch.float64)
    x.view(-1)[:5] = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.5, -0.5], dtype=torch.float64)
    return x


B1, B2 = torch.randn(2, 3, 4, dtype=torch.float64), torch.randn(2, 4, 5, dtype=torch.float64)
POINTWISE_AND_MATMUL_CASES = [
    (aten.glu.default, (special_values((4, 6)),), {}),
    (aten.glu.default, (special_values((4, 6)), 0), {}),
    (aten.baddbmm.default, (special_values((2, 3, 5)), B1, B2), {}),
    (aten.baddbmm.default, (special_values((3, 5)), B1, B2), {"beta": 0.5, "alpha": 2.0}),
    (aten.baddbmm.default, (special_values((2, 3, 5)), B1, B2), {"beta": 0, "alpha": -1.5}),  # the NaN stays out
    # var_mean's one-pass mean of an infinity depends on where it is (see composite_ops): finite values and a NaN
    (aten.var_mean.dim, (special_values((4, 6)).nan_to_num(posinf=1.0, neginf=2.0), [1], True, True), {}),
    (aten.var_mean.dim, (torch.randn(4, 6, dtype=torch.float64), None), {}),
    (aten.var_mean.correction, (torch.randn(4, 6, dtype=torch.float64), [0]), {"correction": 0}),
    (aten.var_mean.correction, (torch.randn(3, 4, 5, dtype=torch.float64), [0, 2]), {"keepdim": True}),
]


@pytest.mark.parametrize(("op", "args", "kwargs"), POINTWISE_AND_MATMUL_CASES)
def test_each_opened_op_computes_what_pytorchs_op_computes(op, args, kwargs):
    opened, expected = OPENED_COMPOSITES[op](*args, **kwargs), op(*args, **kwargs)
    for got, want in zip(opened if isinstance(opened, tuple) else (opened,),
                         expected if isinstance(expected, tuple) else (expected,)):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12, equal_nan=True)


@pytest.mark.parametrize("shrink", [nn.Hardshrink(0.25), nn.Softshrink(0.5)])
def test_the_shrink_ops_pytorch_opens_keep_its_nan_and_interval_ends(shrink):
    x = special_values((4, 6))
    opened = open_composite_ops(torch.export.export(shrink.double(), (x,))).module()
    assert not [node for node in opened.graph.nodes if "shrink" in str(node.target)]
    torch.testing.assert_close(opened(x), shrink(x), rtol=0, atol=0, equal_nan=True)


OPENED_SOURCE = '''
import torch
import torch.nn as nn
import torch.nn.functional as F


class Mixed(nn.Module):
    def forward(self, x, scores, queries, keys):
        variance, mean = torch.var_mean(x, dim=-1, keepdim=True)
        normed = (x - mean) * torch.rsqrt(variance + 1e-5)
        gated = F.glu(normed, -1)
        shrunk = F.hardshrink(gated, 0.3) + F.softshrink(gated, 0.2)
        attention = torch.baddbmm(scores, queries, keys, beta=0.5, alpha=0.125)
        return shrunk, attention


def get_inputs():
    return [torch.randn(6, 16), torch.randn(2, 5, 7), torch.randn(2, 5, 8), torch.randn(2, 8, 7)]


def get_init_inputs():
    return []
'''


def test_a_captured_graph_holds_the_opened_forms_and_compiles_them_into_kernels(tmp_path):
    module = load_module_from_source(OPENED_SOURCE, "mixed", tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = capture_graph(module.Mixed().eval(), tuple(module.get_inputs()))
    ops = {node.op for node in graph.nodes}
    assert not ops & {str(op) for op in [*OPENED_COMPOSITES, *OPENED_BY_PYTORCH]}
    program = compile_graph(graph, prefix="mixed", forward_params=["x", "scores", "queries", "keys"], has_self=True)
    assert {"aten.bmm.default", "aten.sigmoid.default", "aten.var.correction", "aten.where.self"} <= set(
        program.replaced_ops
    )


CELLS_SOURCE = '''
import torch
import torch.nn as nn


class Cells(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRUCell(24, 32)
        self.lstm = nn.LSTMCell(24, 32, bias=False)
        self.rnn = nn.RNNCell(24, 32, nonlinearity="relu")

    def forward(self, x, h, c):
        out, new_c = self.lstm(x, (h, c))
        return self.gru(x, out) + self.rnn(x, h), new_c


def get_inputs():
    return [torch.randn(6, 24), torch.randn(6, 32), torch.randn(6, 32)]


def get_init_inputs():
    return []
'''


def test_a_captured_graph_holds_the_cells_matmuls_and_gates_and_the_gates_get_kernels(tmp_path):
    module = load_module_from_source(CELLS_SOURCE, "cells", tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = capture_graph(module.Cells().eval(), tuple(module.get_inputs()))
    ops = [node.op for node in graph.nodes]
    assert not [op for op in ops if op.removeprefix("aten.").split(".")[0].endswith("_cell")]
    assert ops.count("aten.linear.default") == 6 and "aten.sigmoid.default" in ops and "aten.tanh.default" in ops
    program = compile_graph(graph, prefix="cells", forward_params=["x", "h", "c"], has_self=True)
    assert {"aten.sigmoid.default", "aten.tanh.default", "aten.relu.default"} <= set(program.replaced_ops)


def test_a_program_without_cells_is_left_as_it_is():
    exported = torch.export.export(nn.Linear(4, 4), (torch.randn(2, 4),))
    assert open_composite_ops(exported) is exported


@pytest.mark.slow
@pytest.mark.parametrize(
    ("source", "replaced"),  # replaced: an op of the reference's (the ATen audit's names) the kernels computed
    [(CELLS_SOURCE, "aten.sigmoid_.default"), (OPENED_SOURCE, "aten.glu.default")],
    ids=["recurrent_cells", "glu_shrink_baddbmm_var_mean"],
)
def test_opened_ops_are_verified_end_to_end_in_triton(tmp_path, source, replaced):
    (tmp_path / "program.py").write_text(source)
    finished = subprocess.run(
        [sys.executable, "-m", "drtriton_lsp.cli", "optimize", str(tmp_path / "program.py"), "--device", "cpu",
         "--trials", "2", "--json", str(tmp_path / "report.json")],
        capture_output=True, text=True, timeout=600,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    report = report[0] if isinstance(report, list) else report
    assert report["status"] == "verified", report.get("message")
    assert replaced in report["replaced_ops"]


class TwoLstmSteps(nn.Module):
    def __init__(self):
        super().__init__()
        self.cell = nn.LSTMCell(8, 16)

    def forward(self, x):
        h = c = x.new_zeros(x.size(1), 16)
        outputs = []
        for step in x.unbind(0):
            h, c = self.cell(step, (h, c))
            outputs.append(h)
        return torch.stack(outputs)


def test_an_lstm_step_with_its_matmuls_kept_is_one_pointwise_kernel_as_eagers_fused_cell():
    # on the GPU float32 matmuls stay in cuBLAS (keep); each step's two projections are then added, split into four
    # gates and put through the gate maths: one kernel, reading both projections (an add before the split was a
    # kernel of its own, 0.80x eager on the H200)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = capture_graph(TwoLstmSteps().eval(), (torch.randn(2, 4, 8),))
    default = compile_graph(graph, prefix="lstm", forward_params=["x"], has_self=True).schedule
    matmuls_kept = "\n".join(f"keep {line.split()[2]}" if line.startswith("kernel matmul") else line
                             for line in default.splitlines()) + "\n"
    program = compile_graph(graph, prefix="lstm", forward_params=["x"], has_self=True, schedule=matmuls_kept)
    pointwise = [line for line in program.schedule.splitlines() if line.startswith("kernel pointwise")]
    assert len(pointwise) == 2, program.schedule
    assert all("sigmoid" in line and "tanh" in line for line in pointwise)
