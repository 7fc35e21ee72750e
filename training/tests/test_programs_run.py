"""A sample of generated programs across levels runs in eager PyTorch and exports with capture_graph; the first
program of each level, compiled to Triton, gives eager's results under Triton's interpreter.

Zero failures allowed: a failure is a bug in an operator's constraint (or in the compiler), fixed there.
"""

from __future__ import annotations

import importlib.util
import inspect
import logging
import os
import sys

import pytest
import torch

if not torch.cuda.is_available():
    # before Triton is imported: its own library functions (tl.sigmoid, ...) are kernels defined at import
    os.environ.setdefault("TRITON_INTERPRET", "1")

from synthetic_programs import load_program, output_shapes  # noqa: E402
from drtriton_lsp.compiler.codegen import compile_graph  # noqa: E402
from drtriton_lsp.worker.capture import capture_graph  # noqa: E402
from drtriton_lsp.worker.judge import Tally, _compare  # noqa: E402
from drtriton_training.dataset import synthesize_one  # noqa: E402
from drtriton_training.programs import program_seed  # noqa: E402
from drtriton_training.shapes import SynthesisLimits  # noqa: E402

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
    assert [list(spec) for spec in _output_shapes(graph)] == program.metadata["output_shapes"], program.source


@pytest.mark.slow
@pytest.mark.parametrize("level", LEVELS)
def test_the_compiled_program_gives_eagers_results(level, tmp_path):
    program = synthesize_one((level, program_seed(99, level, 0), SynthesisLimits()))
    model, inputs = load_program(program.source)
    device = "cuda" if torch.cuda.is_available() else "cpu"  # on the CPU, under Triton's interpreter
    model, inputs = model.to(device), [value.to(device) for value in inputs]
    graph = capture_graph(model, tuple(inputs))
    parameters = list(inspect.signature(model.forward).parameters)
    compiled = compile_graph(graph, prefix="synthetic", forward_params=parameters, has_self=True)
    assert compiled.replaced_ops, f"nothing of this program runs in Triton:\n{program.source}"
    source = "\n".join(compiled.required_imports) + "\n\n\n" + compiled.kernel_block
    generated = _import(tmp_path / f"synthetic_level_{level}.py", source)
    with torch.no_grad():
        expected = model(*inputs)
        actual = getattr(generated, compiled.forward_function)(model, *inputs)
    # the verifier's comparison and tolerances (interpreter: bfloat16 rounds differently on the CPU)
    _compare(_listed(expected), _listed(actual), Tally(interpreter=True), f"level {level}")


def _listed(result) -> list:
    return list(result) if isinstance(result, (tuple, list)) else [result]


def _output_shapes(graph) -> list[tuple]:
    """The shape of each output of the captured graph, from the specs of the nodes (or inputs) it returns; a size
    export left free reads as the value it had in the example inputs."""
    specs = {node.name: node.spec for node in graph.nodes}
    specs |= {graph_input.name: graph_input.spec for graph_input in graph.inputs}
    hints = graph.symbol_hints
    return [tuple(hints.get(size, size) for size in specs[output["ref"]].shape) for output in graph.outputs]


def _import(path, source: str):
    """Import generated source from a file (Triton reads a kernel's source from its file)."""
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    return module
