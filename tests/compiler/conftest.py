"""Helpers for compiler tests: capture a module, compile it, import the generated program.

Without a GPU, generated kernels run under Triton's interpreter (set before any kernel is defined).
"""

from __future__ import annotations

import importlib.util
import os
import sys
import warnings
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")

from drtriton_lsp.compiler.codegen import CompiledProgram, compile_graph  # noqa: E402
from drtriton_lsp.worker.capture import capture_graph  # noqa: E402

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"


def compile_module(model: torch.nn.Module, example_inputs: tuple, prefix: str = "model") -> CompiledProgram:
    """Capture `model` on `example_inputs` and compile it as a module target."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = capture_graph(model.eval(), example_inputs)
    params = [graph_input.target for graph_input in graph.inputs if graph_input.kind == "user_input"]
    return compile_graph(graph, prefix=prefix, forward_params=params, has_self=True)


@pytest.fixture(autouse=True)
def seeded_inputs():
    """Random test inputs repeat run to run: a low-precision rounding tie must fail every time or never."""
    torch.manual_seed(0)


@pytest.fixture
def compile_model():
    """`compile_module`, for tests (conftest modules are not imported by name)."""
    return compile_module


@pytest.fixture
def device() -> str:
    """Where generated kernels run: the GPU when there is one, else the CPU under the interpreter."""
    return DEVICE


@pytest.fixture
def load_program(tmp_path: Path):
    """Write a program's source to a module file (Triton reads kernel source from files) and import it."""
    counter = iter(range(1_000_000))

    def load(program: CompiledProgram):
        name = f"generated_program_{next(counter)}"
        path = tmp_path / f"{name}.py"
        path.write_text("\n".join(program.required_imports) + "\n\n\n" + program.kernel_block)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module

    yield load


@pytest.fixture
def run_hybrid(load_program):
    """Compile `model` at the example inputs, run the hybrid at `test_inputs`, return both results."""

    def run(model: torch.nn.Module, example_inputs: tuple, test_inputs: tuple):
        model = model.eval().to(DEVICE)
        example_inputs = tuple(_to_device(value) for value in example_inputs)
        test_inputs = tuple(_to_device(value) for value in test_inputs)
        program = compile_module(model, example_inputs)
        module = load_program(program)
        with torch.no_grad():
            expected = model(*test_inputs)
            actual = getattr(module, program.forward_function)(model, *test_inputs)
        return program, actual, expected

    return run


def _to_device(value):
    return value.to(DEVICE) if isinstance(value, torch.Tensor) else value
