"""`loads=descriptors` matmul kernels read operand tiles through TMA tensor descriptors where the layout allows it.

The wrapper decides per call, from strides and addresses: these tests record the descriptors it builds and compare
every result with PyTorch, on layouts that take descriptors and on layouts that must not.
"""

from __future__ import annotations

import builtins
import importlib.util
import sys
import types
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
import triton.tools.tensor_descriptor as tensor_descriptor
from torch import nn

from drtriton_lsp.compiler.errors import ScheduleError
from drtriton_lsp.compiler.planner import default_schedule
from drtriton_lsp.compiler.script import print_schedule
from drtriton_lsp.engine.candidate_policy import policy_violation
from drtriton_lsp.source.candidate import build_candidate
from tests.compiler.schedule_helpers import capture, compile_with

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter computes masked-off lanes too

TOLERANCES = {
    torch.float32: {"atol": 1e-4, "rtol": 1e-4},
    torch.float16: {"atol": 1e-2, "rtol": 1e-2},
    torch.bfloat16: {"atol": 1.6e-2, "rtol": 1.6e-2},
}
DTYPES = pytest.mark.parametrize(
    "dtype", [torch.float32, torch.float16, torch.bfloat16], ids=["float32", "float16", "bfloat16"]
)


def with_descriptor_loads(graph) -> str:
    """The default schedule with every matmul kernel reading through descriptors."""
    script = print_schedule(default_schedule(graph))
    assert "loads=pointers" in script
    return script.replace("loads=pointers", "loads=descriptors")


class RecordingRun:
    """Compiles a module with every matmul kernel on `loads=descriptors`, runs the generated forward and PyTorch's at
    test inputs, and records the (shape, strides, block) of each descriptor the wrappers build.

    The generated module is imported with its own `__import__`, which hands it a stand-in for the descriptor module:
    Triton's own code (its launcher tells descriptor arguments from tensors by that class) is left as it is.
    """

    def __init__(self, directory: Path, device: str):
        self.directory, self.device = directory, device
        self.built: list[tuple] = []
        stand_in = types.ModuleType(tensor_descriptor.__name__)
        stand_in.TensorDescriptor = self._record

        def importing(name, *arguments, **keywords):
            return stand_in if name == tensor_descriptor.__name__ else builtins.__import__(name, *arguments, **keywords)

        self.builtins = {**vars(builtins), "__import__": importing}

    def _record(self, base, shape, strides, block_shape, *rest):
        self.built.append((list(shape), list(strides), list(block_shape)))
        return tensor_descriptor.TensorDescriptor(base, shape, strides, block_shape, *rest)

    def __call__(self, model: nn.Module, example_inputs: tuple, test_inputs: tuple, script: str | None = None):
        """script: the schedule to compile (default: the default schedule with descriptor loads)."""
        model = model.eval().to(self.device)
        graph = capture(model, tuple(value.to(self.device) for value in example_inputs))
        program = compile_with(graph, script or with_descriptor_loads(graph))
        name = f"descriptor_program_{len(list(self.directory.iterdir()))}"
        path = self.directory / f"{name}.py"
        path.write_text("\n".join(program.required_imports) + "\n\n\n" + program.kernel_block)
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        module.__dict__["__builtins__"] = self.builtins  # before its functions exist: they keep these builtins
        sys.modules[name] = module
        spec.loader.exec_module(module)
        test_inputs = tuple(value.to(self.device) for value in test_inputs)
        with torch.no_grad():
            expected = model(*test_inputs)
            actual = getattr(module, program.forward_function)(model, *test_inputs)
        return program, actual, expected


@pytest.fixture
def run_recording(tmp_path, device) -> RecordingRun:
    return RecordingRun(tmp_path, device)


class GatedLinear(nn.Module):
    """A linear layer (weight [N, K]: K contiguous) with a bias and an epilogue."""

    def __init__(self, width: int, hidden: int):
        super().__init__()
        self.fc = nn.Linear(width, hidden)

    def forward(self, x):
        return F.silu(self.fc(x)) * 0.5


class Product(nn.Module):
    def forward(self, x, y):
        return torch.relu(x @ y)


def randn(*shape, dtype):
    return torch.randn(*shape).to(dtype)


@DTYPES
def test_a_linear_layer_reads_its_weight_as_n_by_k_tiles(dtype, run_recording):
    model = GatedLinear(24, 40).to(dtype)
    program, actual, expected = run_recording(model, (randn(4, 24, dtype=dtype),), (randn(37, 24, dtype=dtype),))
    assert "RIGHT_K_CONTIGUOUS" in program.kernel_block
    block_m, block_n, block_k = (int(size) for size in program.schedule.split("tile=")[1].split()[0].split("x"))
    # rows 37 x K 24 (row stride 24), and the weight as [N 40, K 24]: tiles of [N, K]
    assert run_recording.built == [([37, 24], [24, 1], [block_m, block_k]), ([40, 24], [24, 1], [block_n, block_k])]
    torch.testing.assert_close(actual, expected, **TOLERANCES[dtype])


@DTYPES
def test_a_row_major_right_operand_reads_k_by_n_tiles(dtype, run_recording):
    program, actual, expected = run_recording(
        Product(),
        (randn(4, 8, dtype=dtype), randn(8, 16, dtype=dtype)),
        (randn(21, 40, dtype=dtype), randn(40, 48, dtype=dtype)),
    )
    assert [shape for shape, _, _ in run_recording.built] == [[21, 40], [40, 48]]
    torch.testing.assert_close(actual, expected, **TOLERANCES[dtype])


def test_leading_dims_flatten_into_the_rows_of_one_descriptor(run_recording):
    model = GatedLinear(16, 24).to(torch.float16)
    program, actual, expected = run_recording(
        model, (randn(2, 3, 16, dtype=torch.float16),), (randn(3, 5, 16, dtype=torch.float16),)
    )
    assert run_recording.built[0][:2] == ([15, 16], [16, 1])
    torch.testing.assert_close(actual, expected, **TOLERANCES[torch.float16])


@pytest.mark.parametrize(
    "layout",
    ["row stride not a multiple of 16 bytes", "address not 16-byte aligned", "rows that do not flatten", "m contiguous"],
)
def test_layouts_a_descriptor_cannot_read_go_through_pointers(layout, run_recording, device):
    dtype = torch.float16
    model = GatedLinear(16, 24).to(dtype)
    example = (randn(2, 3, 16, dtype=dtype),)
    # each layout made where the kernels run (moving a tensor there would copy it into a plain layout)
    if layout == "row stride not a multiple of 16 bytes":
        x = randn(3, 5, 20, dtype=dtype).to(device)[..., :16]  # rows 20 elements (40 bytes) apart
    elif layout == "address not 16-byte aligned":
        x = randn(3 * 5 * 16 + 1, dtype=dtype).to(device)[1:].view(3, 5, 16)  # 2 bytes past an aligned address
    elif layout == "rows that do not flatten":
        x = randn(5, 3, 16, dtype=dtype).to(device).transpose(0, 1)  # dim 0 steps over 16 elements, dim 1 over 48
    else:
        x = randn(16, 3, 5, dtype=dtype).to(device).permute(1, 2, 0)  # K is the slowest dim
    program, actual, expected = run_recording(model, example, (x,))
    assert "DESCRIPTORS" in program.kernel_block
    assert run_recording.built == []
    torch.testing.assert_close(actual, expected, **TOLERANCES[dtype])


def test_the_default_schedule_reads_through_pointers(compile_model):
    program = compile_model(GatedLinear(16, 24).to(torch.float16), (randn(4, 16, dtype=torch.float16),))
    assert "loads=pointers" in program.schedule and "DESCRIPTORS" not in program.kernel_block


@pytest.mark.parametrize(
    ("function", "inputs", "reason"),
    [
        (lambda x, y: torch.bmm(x, y), ((2, 4, 8), (2, 8, 16)), "batch dims to walk"),
        (lambda x, y: x @ y, ((1, 8), (8, 16)), "a single output row"),
    ],
    ids=["batched", "one row"],
)
def test_products_that_are_not_one_matrix_refuse_descriptor_loads(function, inputs, reason):
    class Pair(nn.Module):
        def forward(self, x, y):
            return function(x, y)

    graph = capture(Pair(), tuple(randn(*shape, dtype=torch.float16) for shape in inputs))
    with pytest.raises(ScheduleError, match=reason):
        compile_with(graph, with_descriptor_loads(graph))


TASK = '''
import torch
from torch import nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(24, 40)

    def forward(self, x):
        return self.fc(x)


def get_inputs():
    return [torch.randn(4, 24, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
'''


def test_the_verifier_policy_accepts_a_candidate_that_builds_descriptors():
    graph = capture(nn.Linear(24, 40).to(torch.bfloat16), (randn(4, 24, dtype=torch.bfloat16),))
    program = compile_with(graph, with_descriptor_loads(graph))
    candidate = build_candidate(TASK, program, "Triton candidate for Model.")
    assert "from triton.tools.tensor_descriptor import TensorDescriptor" in candidate
    assert policy_violation(candidate, TASK) is None


class ProductRowMax(nn.Module):
    def forward(self, x, y):
        return (x @ y).amax(-1)


def test_a_fused_reduction_whose_tile_widens_at_run_time_reads_tiles_of_the_widened_width(run_recording):
    dtype = torch.float16
    # captured with N = 16; at N = 48 the fused row reduction widens the tile's N to 64 at run time
    program, actual, expected = run_recording(
        ProductRowMax(),
        (randn(4, 8, dtype=dtype), randn(8, 16, dtype=dtype)),
        (randn(21, 40, dtype=dtype), randn(40, 48, dtype=dtype)),
        script="kernel matmul matmul,amax tile=16x16x16 group=8 warps=4 stages=3 precision=ieee loads=descriptors\n",
    )
    (_, _, left_block), (_, _, right_block) = run_recording.built
    assert right_block[1] == 64
    torch.testing.assert_close(actual, expected, **TOLERANCES[dtype])


def test_a_tile_widened_past_what_a_descriptor_spans_reads_through_pointers(run_recording):
    dtype = torch.float16
    program, actual, expected = run_recording(
        ProductRowMax(),
        (randn(4, 8, dtype=dtype), randn(8, 16, dtype=dtype)),
        (randn(21, 40, dtype=dtype), randn(40, 304, dtype=dtype)),  # N 304: a 512-wide tile, a TMA box spans 256
        script="kernel matmul matmul,amax tile=16x16x16 group=8 warps=4 stages=3 precision=ieee loads=descriptors\n",
    )
    assert run_recording.built == []
    torch.testing.assert_close(actual, expected, **TOLERANCES[dtype])
