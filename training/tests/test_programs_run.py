"""A sample of generated programs across levels runs in eager PyTorch and exports with capture_graph.

Zero failures allowed: a failure is a bug in an operator's constraint, fixed there.
"""

from __future__ import annotations

import inspect
import logging

import pytest
import torch

from synthetic_programs import load_program, output_shapes
from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.engine.capture import capture_graph
from drtriton_training.dataset import program_seed, synthesize_one
from drtriton_training.shapes import SynthesisLimits

LEVELS = (1, 2, 3, 5, 8, 12, 20)
PER_LEVEL = 14
SAMPLE = [(level, index) for level in LEVELS for index in range(PER_LEVEL)]


@pytest.fixture(autouse=True)
def quiet_export():
    logging.getLogger("torch._export").setLevel(logging.ERROR)


@pytest.mark.parametrize("level,index", SAMPLE)
def test_program_runs_in_eager_and_exports(level, index):
    program = synthesize_one((level, program_seed(99, level, index), SynthesisLimits()))
    model, inputs = load_program(program.source)
    with torch.no_grad():
        result = model(*inputs)
    assert output_shapes(result) == [tuple(shape) for shape in program.metadata["output_shapes"]]
    graph = capture_graph(model, tuple(inputs))
    assert graph.nodes, program.source
    if index == 0:
        parameters = list(inspect.signature(model.forward).parameters)
        compiled = compile_graph(graph, prefix="synthetic", forward_params=parameters, has_self=True)
        assert compiled.forward_function in compiled.kernel_block
