"""compile_graph end to end: hybrid structure, names, determinism, and graphs with awkward parts.

Each program is captured from a real module, imported from a file, and run against the module.
"""

from __future__ import annotations

import ast
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.forward_source import UnsupportedGraphError
from drtriton_lsp.engine.pipeline import no_candidate_message
from drtriton_lsp.worker.capture import capture_graph

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter computes masked-off lanes too


class MLPBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 32)
        self.scale = nn.Parameter(torch.randn(32))

    def forward(self, x):
        hidden = F.gelu(self.fc(x)) * self.scale + 1.0
        return torch.relu(hidden), hidden.max(dim=1)[0]


def test_linear_chain_and_reduction_give_a_hybrid(run_hybrid):
    program, actual, expected = run_hybrid(MLPBlock(), (torch.randn(4, 16),), (torch.randn(37, 16),))
    # the linear chain is one matmul kernel; the reduction reads what it stores (its own step comes after)
    assert "aten.linear.default" not in program.kept_ops
    assert program.replaced_ops[:5] == (
        "aten.linear.default", "aten.gelu.default", "aten.mul.Tensor", "aten.add.Tensor", "aten.relu.default",
    )  # fmt: skip
    assert program.kernels[0] == "model_fused_linear_gelu_mul_add_and_more_kernel"
    assert program.schedule.splitlines()[0] == (
        "kernel matmul linear,gelu,mul,add,relu tile=16x32x16 group=8 warps=4 stages=3 precision=ieee loads=pointers"
    )
    for got, want in zip(actual, expected):
        torch.testing.assert_close(got, want)


def test_every_generated_top_level_name_carries_the_prefix(compile_model):
    program = compile_model(MLPBlock(), (torch.randn(4, 16),), prefix="mlp_block")
    tree = ast.parse(program.kernel_block)
    names = [node.name for node in tree.body]
    assert names and all(name.startswith("mlp_block_") for name in names)
    assert program.forward_function == "mlp_block_triton_forward"
    assert set(program.kernels) <= set(names)
    assert "mlp_block_fused_linear_gelu_mul_add_and_more" in names


def test_the_same_graph_always_gives_the_same_source(compile_model):
    first = compile_model(MLPBlock(), (torch.randn(4, 16),))
    second = compile_model(MLPBlock(), (torch.randn(4, 16),))
    assert first == second


def test_a_graph_without_elementwise_ops_gives_just_the_forward(compile_model, load_program):
    model = nn.Linear(8, 3).double().eval()  # float64: no template claims it
    program = compile_model(model, (torch.randn(4, 8, dtype=torch.float64),))
    assert program.kernels == () and program.replaced_ops == ()
    assert program.kept_ops == ("aten.linear.default",)
    assert [node.name for node in ast.parse(program.kernel_block).body] == [program.forward_function]
    x = torch.randn(5, 8, dtype=torch.float64)
    torch.testing.assert_close(getattr(load_program(program), program.forward_function)(model, x), model(x))


class GatedFunction(nn.Module):
    def forward(self, x, gate):
        return torch.sigmoid(gate) * x


def test_a_function_target_has_no_self(load_program, device):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = capture_graph(GatedFunction(), (torch.randn(4, 6), torch.randn(4, 6)))
    program = compile_graph(graph, prefix="gated", forward_params=["x", "gate"], has_self=False)
    assert "def gated_triton_forward(x, gate, *, drtriton_module_tensors=None):" in program.kernel_block
    x, gate = torch.randn(37, 53, device=device), torch.randn(37, 53, device=device)
    actual = getattr(load_program(program), program.forward_function)(x, gate)
    torch.testing.assert_close(actual, torch.sigmoid(gate) * x)


def test_unknown_forward_parameters_are_reported():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = capture_graph(GatedFunction(), (torch.randn(4, 6), torch.randn(4, 6)))
    with pytest.raises(UnsupportedGraphError, match="'gate' is not a forward parameter"):
        compile_graph(graph, prefix="gated", forward_params=["x", "y"], has_self=False)


def test_parameters_under_numbered_submodules_are_read_with_get_parameter(run_hybrid):
    model = nn.Sequential(nn.Linear(6, 6), nn.Tanh(), nn.Linear(6, 6), nn.SiLU())
    program, actual, expected = run_hybrid(model, (torch.randn(4, 6),), (torch.randn(37, 6),))
    assert "self.get_parameter('0.weight')" in program.kernel_block
    assert not program.kept_ops
    torch.testing.assert_close(actual, expected)


def test_the_forward_computes_with_the_module_tensors_it_is_given_and_reads_its_own_without_them(
        compile_model, load_program, device):
    model = nn.Sequential(nn.Linear(6, 6), nn.Tanh()).eval()
    program = compile_model(model, (torch.randn(4, 6),))
    forward = getattr(load_program(program), program.forward_function)
    model, x = model.to(device), torch.randn(4, 6, device=device)
    # what the written dispatch passes: the tensors its guards read and checked, by path
    given = {"0.weight": torch.eye(6, device=device), "0.bias": torch.zeros(6, device=device)}
    with torch.no_grad():
        torch.testing.assert_close(forward(model, x, drtriton_module_tensors=given), torch.tanh(x))
        torch.testing.assert_close(forward(model, x), model(x))  # called directly: its own parameters


class InPlaceUpdates(nn.Module):
    def forward(self, x):
        scaled = x * 2
        alias = F.dropout(scaled, 0.3, training=False)  # in eval mode `scaled` itself, which export does not record
        scaled.add_(1)  # so this write stays in place, and `alias` sees it
        activated = F.relu(scaled * x, inplace=True)  # writes a value nothing else holds: captured as relu
        return torch.sigmoid(alias) * activated, F.dropout(activated, 0.3, training=False) + 1


def test_in_place_ops_stay_in_pytorch_and_keep_their_order(run_hybrid):
    program, actual, expected = run_hybrid(InPlaceUpdates(), (torch.randn(4, 6),), (torch.randn(37, 53),))
    assert "aten.add_.Tensor" in program.kept_ops and "aten.relu_.default" not in program.kept_ops
    # dropout may return its input itself; with in-place ops around, that alias must stay exact
    assert "aten.dropout.default" in program.kept_ops
    for got, want in zip(actual, expected):
        torch.testing.assert_close(got, want)


class ResidualConvBlock(nn.Module):
    """A ResNet block's tail as model code writes it: in-place ReLU after batch norm, `+=` into a fresh value."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x, skip):
        out = self.relu(self.bn(self.conv(x)))
        out += skip
        return self.relu(out)


def test_in_place_ops_on_fresh_values_leave_the_block_to_the_kernels(run_hybrid):
    model = ResidualConvBlock()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
    program, actual, expected = run_hybrid(
        model, (torch.randn(2, 3, 8, 8), torch.randn(2, 4, 8, 8)), (torch.randn(3, 3, 9, 7), torch.randn(3, 4, 9, 7))
    )
    # the convolution stays in cuDNN by default; batch norm, both ReLUs and the add are one normalize kernel
    assert program.kept_ops == ("aten.conv2d.default",)
    assert len(program.kernels) == 1
    torch.testing.assert_close(actual, expected)


class PaddedChannels(nn.Module):
    """Writes a slice of a tensor it allocated, then batch norm: export functionalises the write and decomposes
    the batch norm, which capture folds back."""

    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x, part):
        out = torch.zeros_like(x)
        out[:, :2] = part
        return F.relu(self.bn(out), inplace=True) * 2


def test_a_functionalised_write_leaves_batch_norm_and_its_epilogue_to_one_kernel(run_hybrid):
    model = PaddedChannels()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-1, 1)
        model.bn.running_var.uniform_(0.5, 2)
    program, actual, expected = run_hybrid(
        model, (torch.randn(2, 4, 3, 3), torch.randn(2, 2, 3, 3)), (torch.randn(3, 4, 5, 2), torch.randn(3, 2, 5, 2))
    )
    assert "aten.batch_norm.default" in program.replaced_ops and "aten.relu.default" in program.replaced_ops
    assert not any(op.split(".")[1].endswith("_") for op in program.kept_ops)
    torch.testing.assert_close(actual, expected)


class DropoutAroundKeptOps(nn.Module):
    """A recurrent model's shape: eval-mode dropout around ops no template computes (flip stands for the GRU)."""

    def forward(self, x):
        hidden = F.dropout(x, 0.2, training=False).flip(0)
        return F.dropout(hidden, 0.2, training=False).to(torch.float16)


def test_kernels_that_would_only_copy_are_left_to_pytorch(run_hybrid):
    program, actual, expected = run_hybrid(DropoutAroundKeptOps(), (torch.randn(4, 6),), (torch.randn(7, 5),))
    assert program.kernels == ()
    assert sorted(program.kept_copies) == ["aten.dropout.default", "aten.dropout.default", "aten.to.dtype"]
    assert torch.equal(actual, expected)


def test_a_target_with_only_copies_for_triton_says_so(compile_model):
    program = compile_model(DropoutAroundKeptOps(), (torch.randn(4, 6),))
    message = no_candidate_message(program)
    assert "copy data (aten.dropout.default, aten.to.dtype)" in message and "computes nothing" in message


def test_dropout_between_computing_ops_still_fuses(compile_model):
    program = compile_model(nn.Sequential(nn.Tanh(), nn.Dropout(0.2), nn.Sigmoid()), (torch.randn(4, 6),))
    assert len(program.kernels) == 1 and "aten.dropout.default" in program.replaced_ops


class CapitalisedParameters(nn.Module):
    def forward(self, A, B, alpha: float, C):
        return torch.relu(A * alpha + B) - C


def test_capitalised_forward_parameters_are_the_hybrid_forward_parameters(run_hybrid):
    program, actual, expected = run_hybrid(
        CapitalisedParameters(),
        (torch.randn(4, 6), torch.randn(4, 6), 0.5, torch.randn(4, 6)),
        (torch.randn(9, 5), torch.randn(9, 5), 0.5, torch.randn(9, 5)),
    )
    assert "_triton_forward(self, A, B, alpha, C, *, drtriton_module_tensors=None):" in program.kernel_block
    torch.testing.assert_close(actual, expected)


class Diamond(nn.Module):
    def forward(self, x):
        grown = torch.exp(x)
        wave = torch.sin(x)
        return grown * wave, grown


def test_values_read_outside_a_kernel_become_extra_outputs(run_hybrid):
    program, actual, expected = run_hybrid(Diamond(), (torch.randn(4, 6),), (torch.randn(37, 53),))
    assert len(program.kernels) == 1
    # sin's value stays in registers; exp is returned and read by mul, so both exp and mul are stored
    assert "    exp, mul = model_fused_exp_sin_mul(x)\n" in program.kernel_block
    for got, want in zip(actual, expected):
        torch.testing.assert_close(got, want)


class CastBackAfterScaling(nn.Module):
    """A half-precision input scaled in float32 and cast back: export asserts the casts' metadata."""

    def forward(self, x):
        hidden = x.to(torch.float32)
        scaled = hidden * torch.rsqrt(hidden.pow(2).mean(-1, keepdim=True) + 1e-6)
        return scaled.to(x.dtype) * 2


def test_a_value_only_export_metadata_asserts_read_is_not_stored(run_hybrid):
    x = torch.randn(4, 8).to(torch.bfloat16)
    program, actual, expected = run_hybrid(CastBackAfterScaling(), (x,), (torch.randn(5, 8).to(torch.bfloat16),))
    # `mul` (float32) is read by the cast back to bfloat16 in the same kernel and by an assert the hybrid
    # drops: storing it would write a float32 copy of the whole tensor that nothing reads
    assert "    mul_1 = model_fused_mul_to(to, rsqrt)\n" in program.kernel_block
    torch.testing.assert_close(actual, expected, atol=1.6e-2, rtol=1.6e-2)


class ColumnThenGrid(nn.Module):
    def forward(self, column, grid):
        doubled = column * 2
        return torch.tanh(doubled + grid), doubled.sum()


def test_an_op_on_a_larger_domain_starts_a_new_kernel(run_hybrid):
    program, actual, expected = run_hybrid(
        ColumnThenGrid(), (torch.randn(4, 1), torch.randn(4, 6)), (torch.randn(37, 1), torch.randn(37, 53))
    )
    # the column's mul, the grid's add and tanh, and the sum (a reduce kernel) are three kernels
    assert len(program.kernels) == 3
    for got, want in zip(actual, expected):
        torch.testing.assert_close(got, want)


class ShapeArithmetic(nn.Module):
    def forward(self, x):
        widened = x + torch.ones(x.shape[1], device=x.device)
        return torch.sigmoid(widened * x.shape[1]).reshape(x.shape[0] * 2, -1)


def test_shape_arithmetic_and_devices_are_written_as_python(run_hybrid):
    program, actual, expected = run_hybrid(ShapeArithmetic(), (torch.randn(4, 6),), (torch.randn(37, 54),))
    assert "device=x.device" in program.kernel_block
    assert "aten.ones.default" in program.kept_ops
    torch.testing.assert_close(actual, expected)


def test_a_zero_dim_domain_runs_one_element(run_hybrid):
    program, actual, expected = run_hybrid(
        GatedFunction(), (torch.tensor(0.5), torch.tensor(-1.0)), (torch.tensor(2.0), torch.tensor(0.25))
    )
    assert len(program.kernels) == 1
    torch.testing.assert_close(actual, expected)


class DoublePrecision(nn.Module):
    def forward(self, x):
        return torch.exp(x.double()) * 2, torch.exp(x)


def test_float64_ops_stay_in_pytorch(run_hybrid):
    program, actual, expected = run_hybrid(DoublePrecision(), (torch.randn(4, 6),), (torch.randn(37, 53),))
    assert program.replaced_ops == ("aten.exp.default",)
    assert program.kept_ops.count("aten.exp.default") == 1 and "aten.mul.Tensor" in program.kept_ops
    for got, want in zip(actual, expected):
        torch.testing.assert_close(got, want)


class ScaledByChannelAndImage(nn.Module):
    """Broadcast reads indexed along leading dims only, and a full-size read: each index split differently."""

    def forward(self, x, per_channel, per_image, y):
        return x * per_channel + per_image * y


@pytest.mark.parametrize("int32_indices", [True, False], ids=["int32 indices", "int64 indices"])
@pytest.mark.parametrize("layout", ["contiguous", "transposed", "channels_last"])
def test_broadcast_reads_index_the_right_elements_with_either_index_width(int32_indices, layout, load_program, device):
    example = (torch.randn(2, 3, 4, 5), torch.randn(2, 3, 1, 1), torch.randn(2, 1, 1, 1), torch.randn(2, 3, 4, 5))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = capture_graph(ScaledByChannelAndImage().eval(), example)
    program = compile_graph(graph, prefix="model", forward_params=["x", "per_channel", "per_image", "y"], has_self=True)
    assert program.kept_ops == () and program.kernel_block.count("INT32_INDICES=numel + BLOCK <= 2**31") == 1
    if not int32_indices:
        program = program.__class__(**{
            **program.__dict__,
            "kernel_block": program.kernel_block.replace("INT32_INDICES=numel + BLOCK <= 2**31", "INT32_INDICES=False"),
        })
    forward = getattr(load_program(program), program.forward_function)
    x = torch.randn(3, 7, 6, 9, device=device)
    if layout == "transposed":
        x = x.transpose(2, 3)
    elif layout == "channels_last":
        x = x.contiguous(memory_format=torch.channels_last)
    per_channel = torch.randn(3, 7, 1, 1, device=device)
    per_image = torch.randn(3, 1, 1, 1, device=device)
    y = torch.randn(x.shape, device=device)
    torch.testing.assert_close(forward(None, x, per_channel, per_image, y), x * per_channel + per_image * y)


class HeadsAndViews(nn.Module):
    """Views and shape reads around two elementwise chains: the reshape into heads, a transpose and a flatten."""

    def forward(self, x):
        batch, length, width = x.shape
        heads = torch.sigmoid(x).view(batch, length, 2, width // 2).transpose(1, 2)
        merged = (heads * 3.0).permute(0, 2, 1, 3).unsqueeze(0).squeeze(0).flatten(2)
        return torch.tanh(merged) + x.size(1)


def test_views_and_shape_reads_are_written_as_tensor_methods(run_hybrid):
    program, actual, expected = run_hybrid(HeadsAndViews(), (torch.randn(2, 5, 8),), (torch.randn(3, 7, 12),))
    torch.testing.assert_close(actual, expected)
    forward = program.kernel_block[program.kernel_block.index(f"def {program.forward_function}("):]
    assert ".size(" in forward and ".view([" in forward and ".permute([" in forward
    # the same ATen overloads as the captured graph's: only the spelling of the call differs
    assert not any(f"torch.ops.aten.{op}" in forward for op in ("view.", "sym_size.", "permute.", "transpose."))


class GatedChannels(nn.Module):
    """A gate computed per (sample, channel), broadcast over the pixels: squeeze-and-excitation's last step."""

    def forward(self, x, gate):
        return x * torch.sigmoid(gate * 2.0)


class ShiftedNorm(nn.Module):
    """A per-feature shift computed from a parameter, added before a layer norm."""

    def __init__(self):
        super().__init__()
        self.shift = nn.Parameter(torch.randn(12) * 0.1)

    def forward(self, x):
        return F.layer_norm(x + torch.exp(self.shift), (12,))


def test_a_smaller_pointwise_op_read_by_one_broadcast_op_is_computed_in_its_kernel(run_hybrid):
    def inputs(batch, size):
        return torch.randn(batch, 6, size, size), torch.randn(batch, 6, 1, 1)

    program, actual, expected = run_hybrid(GatedChannels(), inputs(2, 5), inputs(3, 7))
    torch.testing.assert_close(actual, expected)
    assert program.schedule.splitlines()[0].startswith("kernel pointwise mul,sigmoid,mul_1")
    assert len(program.kernels) == 1 and not program.kept_ops
    program, actual, expected = run_hybrid(ShiftedNorm(), (torch.randn(4, 12),), (torch.randn(9, 12),))
    torch.testing.assert_close(actual, expected)
    assert len(program.kernels) == 1 and program.schedule.startswith("kernel normalize exp,add,layer_norm")
