"""Capture turns a module into a flat OpGraph with free dims as symbols, or names the bad line.

Runs torch.export in the test process (tests only: the product runs it in a worker).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
import torch.nn as nn

from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.engine.capture import capture_graph
from drtriton_lsp.errors import CaptureError


class LinearGelu(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 32)

    def forward(self, x):
        return torch.nn.functional.gelu(self.fc(x)) * 2.0


class DataDependent(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # the line capture must name
            return x
        return -x


def test_graph_lists_ops_in_order_with_symbolic_batch():
    graph = capture_graph(LinearGelu().eval(), (torch.randn(4, 16),))
    assert [node.op for node in graph.nodes] == ["aten.linear.default", "aten.gelu.default", "aten.mul.Tensor"]
    batch = graph.nodes[0].spec.shape[0]
    assert isinstance(batch, str) and graph.symbol_hints[batch] == 4
    assert graph.nodes[0].spec.shape[1] == 32
    kinds = {i.target: i.kind for i in graph.inputs}
    assert kinds == {"fc.weight": "parameter", "fc.bias": "parameter", "x": "user_input"}


def test_graph_round_trips_through_json():
    graph = capture_graph(LinearGelu().eval(), (torch.randn(4, 16),))
    again = OpGraph.from_json(json.loads(json.dumps(graph.to_json())))
    assert again == graph


def test_data_dependent_control_flow_names_the_line():
    with pytest.raises(CaptureError) as caught:
        capture_graph(DataDependent(), (torch.randn(3),), Path(__file__))
    source_lines = Path(__file__).read_text().splitlines()
    assert "the line capture must name" in source_lines[caught.value.line - 1]
    assert "torch.where" in caught.value.hint
