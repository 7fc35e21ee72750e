"""The matmul template: linear, mm, addmm, bmm, matmul and einsum as Triton GEMMs with fused epilogues.

Each module is captured at one size and run at odd, larger ones (sizes are read at run time), against PyTorch.
"""

from __future__ import annotations

import dataclasses
import functools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from drtriton_lsp.compiler.planner import default_schedule
from drtriton_lsp.compiler.script import KeepLine, KernelLine, parse_schedule, print_schedule
from drtriton_lsp.compiler.templates import TEMPLATES
from drtriton_lsp.compiler.templates.base import KernelPlan
from drtriton_lsp.compiler.templates.matmul import FLOAT32_LIBRARY_FLOPS
from tests.compiler.schedule_helpers import capture, compile_with, schedule_choosing

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter computes masked-off lanes too

FLOAT32 = {"atol": 1e-4, "rtol": 1e-4}
TF32 = {"atol": 1e-2, "rtol": 1e-2}  # float32 matmuls a schedule asks to run on TF32 tensor cores
TOLERANCES = {
    torch.float16: {"atol": 1e-2, "rtol": 1e-2},
    # Triton's interpreter truncates float32 -> bfloat16 rather than rounding to nearest, so each
    # rounding step of a chain may be one more unit off on the CPU (as in the elementwise tests)
    torch.bfloat16: {"atol": 1.6e-2, "rtol": 1.6e-2},
}


class Function(nn.Module):
    """A module around a function of the forward's inputs (and optional parameters)."""

    def __init__(self, function, **parameters):
        super().__init__()
        self.function = function
        for name, value in parameters.items():
            setattr(self, name, nn.Parameter(value))

    def forward(self, x, y):
        return self.function(self, x, y)


def randn(*shape, dtype=torch.float32):
    return torch.randn(*shape).to(dtype)


def transposed(*shape):
    """A non-contiguous tensor of `shape`: the transpose of a contiguous one."""
    return torch.randn(*reversed(shape)).permute(*reversed(range(len(shape))))


# name: (function of (module, x, y), capture inputs, test inputs at odd sizes)
FAMILY_CASES = {
    "mm": (lambda m, x, y: torch.mm(x, y), (randn(4, 6), randn(6, 5)), (randn(37, 29), randn(29, 61))),
    "addmm[alpha, beta]": (
        lambda m, x, y: torch.addmm(y[0], x, y, beta=0.5, alpha=2),
        (randn(4, 6), randn(6, 5)),
        (randn(7, 13), randn(13, 9)),
    ),
    "bmm": (lambda m, x, y: torch.bmm(x, y), (randn(2, 4, 6), randn(2, 6, 5)), (randn(3, 7, 13), randn(3, 13, 9))),
    "matmul[2d]": (lambda m, x, y: x @ y, (randn(4, 6), randn(6, 5)), (randn(7, 13), randn(13, 9))),
    "matmul[3d @ 2d]": (lambda m, x, y: x @ y, (randn(2, 4, 6), randn(6, 5)), (randn(3, 5, 17), randn(17, 9))),
    "matmul[broadcast batch]": (
        lambda m, x, y: x @ y,
        (randn(2, 3, 4, 6), randn(3, 6, 5)),
        (randn(2, 3, 7, 13), randn(3, 13, 9)),
    ),
    "matmul[2d @ 3d]": (lambda m, x, y: x @ y, (randn(4, 6), randn(2, 6, 5)), (randn(7, 13), randn(3, 13, 9))),
    "matmul[size-1 batch]": (
        lambda m, x, y: x @ y,
        (randn(2, 1, 4, 6), randn(3, 6, 5)),
        (randn(3, 1, 7, 13), randn(3, 13, 9)),
    ),
    "einsum[ij,jk->ik]": (
        lambda m, x, y: torch.einsum("ij,jk->ik", x, y),
        (randn(4, 6), randn(6, 5)),
        (randn(7, 13), randn(13, 9)),
    ),
    "einsum[bij,bjk->bik]": (
        lambda m, x, y: torch.einsum("bij,bjk->bik", x, y),
        (randn(2, 4, 6), randn(2, 6, 5)),
        (randn(3, 7, 13), randn(3, 13, 9)),
    ),
    "einsum[bhqd,bhkd->bhqk]": (
        lambda m, x, y: torch.einsum("bhqd,bhkd->bhqk", x, y),
        (randn(2, 3, 4, 6), randn(2, 3, 5, 6)),
        (randn(2, 3, 7, 13), randn(2, 3, 9, 13)),
    ),
    "einsum[ij,jk->ki]": (
        lambda m, x, y: torch.einsum("ij,jk->ki", x, y),
        (randn(4, 6), randn(6, 5)),
        (randn(7, 13), randn(13, 9)),
    ),
    "einsum[bij,jk->bik]": (
        lambda m, x, y: torch.einsum("bij,jk->bik", x, y),
        (randn(2, 4, 6), randn(6, 5)),
        (randn(3, 7, 13), randn(13, 9)),
    ),
}


@pytest.mark.parametrize("case", list(FAMILY_CASES), ids=list(FAMILY_CASES))
def test_op_family_matches_pytorch_at_odd_sizes(case, run_hybrid):
    function, capture_inputs, test_inputs = FAMILY_CASES[case]
    program, actual, expected = run_hybrid(Function(function), capture_inputs, test_inputs)
    assert program.kept_ops == () and len(program.kernels) == 1, program.schedule
    assert program.schedule.startswith("kernel matmul ")
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, **FLOAT32)


class MLPBlock(nn.Module):
    """The small-batch pattern the epilogue is for: linear, activation, scale, residual add, clamp."""

    def __init__(self, width: int = 13, hidden: int = 17):
        super().__init__()
        self.fc = nn.Linear(width, hidden)
        self.scale = nn.Parameter(torch.randn(hidden))

    def forward(self, x, residual):
        return (F.gelu(self.fc(x)) * self.scale + residual).clamp(-2.0, 2.0)


def test_linear_epilogue_fuses_into_one_kernel_with_a_dynamic_batch(run_hybrid):
    program, actual, expected = run_hybrid(MLPBlock(), (randn(4, 13), randn(4, 17)), (randn(37, 13), randn(37, 17)))
    assert program.kernels == ("model_fused_linear_gelu_mul_add_and_more_kernel",)
    assert program.replaced_ops == (
        "aten.linear.default", "aten.gelu.default", "aten.mul.Tensor", "aten.add.Tensor", "aten.clamp.default",
    )  # fmt: skip
    torch.testing.assert_close(actual, expected, **FLOAT32)


def test_linear_flattens_leading_dims_of_a_non_contiguous_input(run_hybrid):
    model = nn.Linear(13, 9, bias=False)
    program, actual, expected = run_hybrid(model, (randn(2, 4, 13),), (randn(3, 13, 5).transpose(1, 2),))
    assert not program.kept_ops
    torch.testing.assert_close(actual, expected, **FLOAT32)


def test_non_contiguous_operands_and_residual_are_read_through_strides(run_hybrid):
    model = Function(lambda m, x, y: torch.relu(x @ y.t()) + x)
    program, actual, expected = run_hybrid(model, (randn(4, 6), randn(6, 6)), (transposed(7, 13), transposed(13, 13)))
    # y.t() stays a view: the kernel reads it through its strides, nothing is copied
    assert program.view_ops == ("aten.t.default",) and not program.kept_ops
    torch.testing.assert_close(actual, expected, **FLOAT32)


def test_transposed_batches_are_read_through_strides(run_hybrid):
    model = Function(lambda m, x, y: torch.bmm(x, y) - 1)
    program, actual, expected = run_hybrid(
        model,
        (randn(2, 4, 6), randn(2, 6, 5)),
        (randn(7, 3, 13).transpose(0, 1), randn(3, 9, 13).transpose(1, 2)),
    )
    assert len(program.kernels) == 1
    torch.testing.assert_close(actual, expected, **FLOAT32)


def test_per_head_scale_broadcasts_over_the_batch_dims(run_hybrid):
    model = Function(
        lambda m, q, k: torch.einsum("bhqd,bhkd->bhqk", q, k) * m.head_scale,
        head_scale=torch.rand(3, 1, 1),
    )
    program, actual, expected = run_hybrid(
        model, (randn(2, 3, 4, 6), randn(2, 3, 5, 6)), (randn(2, 3, 7, 13), randn(2, 3, 9, 13))
    )
    assert program.replaced_ops == ("aten.einsum.default", "aten.mul.Tensor")
    torch.testing.assert_close(actual, expected, **FLOAT32)


def test_a_single_row_and_a_single_column(run_hybrid):
    model = Function(lambda m, x, y: (x @ y) * 3)
    program, actual, expected = run_hybrid(model, (randn(1, 6), randn(6, 1)), (randn(1, 6), randn(6, 1)))
    assert not program.kept_ops
    torch.testing.assert_close(actual, expected, **FLOAT32)


def test_the_product_and_its_epilogue_are_both_stored_when_both_are_read(run_hybrid):
    def product_and_gate(m, x, y):
        product = x @ y
        return product, torch.sigmoid(product * 2)

    model = Function(product_and_gate)
    program, actual, expected = run_hybrid(model, (randn(4, 6), randn(6, 5)), (randn(7, 13), randn(13, 9)))
    assert len(program.kernels) == 1
    assert "    matmul, sigmoid = model_fused_matmul_mul_sigmoid(x, y)\n" in program.kernel_block
    for got, want in zip(actual, expected):
        torch.testing.assert_close(got, want, **FLOAT32)


def test_addmm_with_beta_zero_ignores_nan_in_its_input(run_hybrid):
    model = Function(lambda m, x, y: torch.addmm(torch.full_like(y, float("nan")), x, y, beta=0))
    program, actual, expected = run_hybrid(model, (randn(5, 5), randn(5, 5)), (randn(7, 7), randn(7, 7)))
    assert "aten.addmm.default" in program.replaced_ops and not actual.isnan().any()
    torch.testing.assert_close(actual, expected, **FLOAT32)


def test_values_named_like_kernel_variables_do_not_collide(run_hybrid):
    class Collisions(nn.Module):
        def forward(self, acc, mask):
            rows = acc @ mask
            return rows + acc[:, :1]

    program, actual, expected = run_hybrid(Collisions(), (randn(4, 6), randn(6, 5)), (randn(7, 13), randn(13, 9)))
    assert not program.kept_ops
    torch.testing.assert_close(actual, expected, **FLOAT32)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_linear_with_epilogue(dtype, run_hybrid):
    model = MLPBlock().to(dtype)
    program, actual, expected = run_hybrid(
        model,
        (randn(4, 13, dtype=dtype), randn(4, 17, dtype=dtype)),
        (randn(37, 13, dtype=dtype), randn(37, 17, dtype=dtype)),
    )
    assert not program.kept_ops and actual.dtype == dtype
    torch.testing.assert_close(actual, expected, **TOLERANCES[dtype])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_batched_einsum(dtype, run_hybrid):
    model = Function(lambda m, q, k: torch.einsum("bhqd,bhkd->bhqk", q, k) * 0.25)
    program, actual, expected = run_hybrid(
        model,
        (randn(2, 3, 4, 6, dtype=dtype), randn(2, 3, 5, 6, dtype=dtype)),
        (randn(2, 3, 7, 29, dtype=dtype), randn(2, 3, 9, 29, dtype=dtype)),
    )
    assert not program.kept_ops and actual.dtype == dtype
    torch.testing.assert_close(actual, expected, **TOLERANCES[dtype])


UNSUPPORTED_CASES = {
    "matrix-vector": (lambda m, x, y: x @ y[0], "aten.matmul.default"),
    "vector-matrix": (lambda m, x, y: x[0] @ y, "aten.matmul.default"),
    "einsum[sum of all]": (lambda m, x, y: torch.einsum("ij,jk->", x, y), "aten.einsum.default"),
    "einsum[outer product]": (lambda m, x, y: torch.einsum("i,k->ik", x[0], y[0]), "aten.einsum.default"),
    "einsum[ellipsis]": (lambda m, x, y: torch.einsum("...j,jk->...k", x, y), "aten.einsum.default"),
    "float64": (lambda m, x, y: x.double() @ y.double(), "aten.matmul.default"),
}


@pytest.mark.parametrize("case", list(UNSUPPORTED_CASES), ids=list(UNSUPPORTED_CASES))
def test_forms_the_template_does_not_cover_stay_in_pytorch(case, run_hybrid):
    function, op = UNSUPPORTED_CASES[case]
    program, actual, expected = run_hybrid(Function(function), (randn(6, 6), randn(6, 6)), (randn(7, 7), randn(7, 7)))
    assert op in program.kept_ops and "kernel matmul" not in program.schedule
    torch.testing.assert_close(actual, expected)


def test_elementwise_ops_before_the_product_get_their_own_kernel(run_hybrid):
    model = Function(lambda m, x, y: torch.tanh(x) @ y)
    program, actual, expected = run_hybrid(model, (randn(4, 6), randn(6, 5)), (randn(7, 13), randn(13, 9)))
    assert [line.split(" ")[1] for line in program.schedule.splitlines()] == ["pointwise", "matmul"]
    torch.testing.assert_close(actual, expected, **FLOAT32)


def test_float32_is_exact_by_default(compile_model):
    program = compile_model(MLPBlock(), (randn(4, 13), randn(4, 17)))
    assert "precision=ieee" in program.schedule and not program.tf32
    assert 'input_precision="ieee"' in program.kernel_block


def with_parameters(schedule: str, **changes) -> str:
    """The script with the matmul kernel's parameters changed (parsed values, e.g. tile=(32, 32, 16))."""
    parsed = parse_schedule(schedule)
    steps = tuple(
        dataclasses.replace(step, params=tuple((name, changes.get(name, value)) for name, value in step.params))
        if getattr(step, "template", None) == "matmul"
        else step
        for step in parsed.steps
    )
    return print_schedule(dataclasses.replace(parsed, steps=steps))


SCHEDULE_CASES = {
    "small tiles, one warp group": {"tile": (16, 32, 16), "group": 1, "warps": 2, "stages": 2},
    "wide tiles, tf32": {"tile": (32, 128, 64), "group": 4, "warps": 8, "stages": 5, "precision": "tf32"},
}


@pytest.mark.parametrize("case", list(SCHEDULE_CASES), ids=list(SCHEDULE_CASES))
def test_schedule_parameters_change_the_kernel_not_the_result(case, load_program, device):
    model = MLPBlock(width=29, hidden=61).to(device).eval()
    graph = capture(model, (randn(4, 29).to(device), randn(4, 61).to(device)))
    default = compile_with(graph)
    changes = SCHEDULE_CASES[case]
    script = with_parameters(default.schedule, **changes)
    assert print_schedule(parse_schedule(script)) == script
    program = compile_with(graph, script)
    assert program.schedule == script and program.kernel_block != default.kernel_block
    assert program.kernel_block == compile_with(graph, script).kernel_block  # same script, same source
    assert program.tf32 == (changes.get("precision") == "tf32")
    block_m, block_n, block_k = changes["tile"]
    for launch_argument in (f"BLOCK_M={block_m},", f"BLOCK_N={block_n},", f"BLOCK_K={block_k},"):
        assert launch_argument in program.kernel_block
    x, residual = randn(37, 29).to(device), randn(37, 61).to(device)
    with torch.no_grad():
        expected = model(x, residual)
        results = [
            getattr(load_program(compiled), compiled.forward_function)(model, x, residual)
            for compiled in (default, program)
        ]
    torch.testing.assert_close(results[0], expected, **FLOAT32)
    # tf32 rounds the operands to 10 mantissa bits on the GPU; the interpreter multiplies exactly
    torch.testing.assert_close(results[1], expected, **(TF32 if program.tf32 else FLOAT32))


def matmul_plan(graph) -> KernelPlan:
    anchor = next(node for node in graph.nodes if node.op == "aten.mm.default")
    return KernelPlan("matmul", "", "", (anchor.name,), (anchor.op,), anchor.name, (), (), anchor.spec.shape, (), ())


@functools.cache
def mm_graph(dtype: torch.dtype):
    return capture(Function(lambda m, x, y: torch.mm(x, y)), (randn(4, 6, dtype=dtype), randn(6, 5, dtype=dtype)))


def hinted_mm_graph(dtype: torch.dtype, rows: int, columns: int, depth: int):
    """An mm graph whose symbolic sizes have the given example values."""
    graph = mm_graph(dtype)
    (row_symbol, depth_symbol), column_symbol = graph.spec_of("x").shape, graph.spec_of("y").shape[1]
    return dataclasses.replace(graph, symbol_hints={row_symbol: rows, column_symbol: columns, depth_symbol: depth})


@pytest.mark.parametrize(
    ("dtype", "sizes", "expected"),
    [
        (torch.float16, (8192, 8192, 8192), {"tile": (128, 256, 64), "warps": 8, "stages": 3}),
        (torch.float16, (8192, 8192, 64), {"tile": (64, 128, 32), "warps": 4, "stages": 3}),
        (torch.bfloat16, (401408, 384, 96), {"tile": (64, 128, 32), "warps": 4, "stages": 3}),
        (torch.float32, (8192, 8192, 8192), {"tile": (128, 64, 32), "warps": 4}),
        (torch.float16, (256, 256, 256), {"tile": (64, 64, 128)}),
        (torch.float32, (256, 256, 256), {"tile": (64, 64, 32)}),
        (torch.float16, (8, 4096, 4096), {"tile": (16, 64, 128)}),
        (torch.float32, (37, 5, 13), {"tile": (64, 16, 16)}),
        (torch.float16, (1, 32768, 128), {"tile": (16, 128, 64), "warps": 4}),
        (torch.float16, (32768, 64, 4096), {"tile": (128, 64, 64), "warps": 4}),
    ],
    ids=[
        "large fp16", "large fp16, short K", "a ConvNeXt block's K = 96", "large fp32", "small fp16", "small fp32", "few rows", "tiny",
        "a wave of one-row products", "a wave of narrow products",
    ],
)
def test_default_parameters_follow_the_problem_size(dtype, sizes, expected):
    graph = hinted_mm_graph(dtype, *sizes)
    parameters = TEMPLATES["matmul"].default_parameters(matmul_plan(graph), graph)
    assert {name: parameters[name] for name in expected} == expected
    assert parameters["precision"] == "ieee" and parameters["loads"] == "pointers"


@pytest.mark.parametrize(
    ("dtype", "sizes", "kept"),
    [
        (torch.float32, (512, 512, 512), True),
        (torch.float32, (512, 512, 511), False),
        (torch.float32, (8, 4096, 4096), True),
        (torch.float16, (8192, 8192, 8192), False),
        (torch.bfloat16, (8192, 8192, 8192), False),
    ],
    ids=["float32 at the threshold", "float32 just below", "float32, few rows", "large fp16", "large bf16"],
)
def test_large_float32_products_stay_in_cublas_by_default(dtype, sizes, kept):
    assert 2 * 512**3 == FLOAT32_LIBRARY_FLOPS
    graph = hinted_mm_graph(dtype, *sizes)
    (line,) = default_schedule(graph).steps
    assert isinstance(line, KeepLine if kept else KernelLine)


def test_a_kept_float32_linear_runs_its_epilogue_in_triton_and_the_search_offers_the_fused_kernel(load_program, device):
    model = MLPBlock(width=512, hidden=512).to(device).eval()  # 2 * 512**3 flops at the example batch of 512
    graph = capture(model, (randn(512, 512).to(device), randn(512, 512).to(device)))
    default = compile_with(graph)
    assert default.kept_ops == ("aten.linear.default",)
    assert [line.split(" ")[:2] for line in default.schedule.splitlines()] == [["keep", "linear"], ["kernel", "pointwise"]]
    fused = compile_with(graph, schedule_choosing(graph, "matmul", required=True))
    assert fused.kept_ops == () and len(fused.kernels) == 1 and fused.schedule.startswith("kernel matmul ")
    x, residual = randn(7, 512).to(device), randn(7, 512).to(device)
    with torch.no_grad():
        expected = model(x, residual)
        for program in (default, fused):
            actual = getattr(load_program(program), program.forward_function)(model, x, residual)
            torch.testing.assert_close(actual, expected, **FLOAT32)
