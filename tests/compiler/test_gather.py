"""Embedding lookups gathered inside fused kernels: the rows are read where the kernel needs them, never stored.

Each model is captured at one size and run at another, on the GPU or under Triton's interpreter, against PyTorch.
"""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from drtriton_lsp.compiler.errors import ScheduleError
from drtriton_lsp.compiler.planner import default_schedule
from drtriton_lsp.compiler.script import print_schedule
from schedule_helpers import capture, compile_with

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter computes masked-off lanes too


class Embeddings(nn.Module):
    """BERT's input embeddings: word, token-type and position lookups summed, then a layer norm."""

    def __init__(self, vocabulary=50, width=24, positions=16, dtype=torch.float32):
        super().__init__()
        self.words = nn.Embedding(vocabulary, width, padding_idx=0, dtype=dtype)
        self.types = nn.Embedding(2, width, dtype=dtype)
        self.positions = nn.Embedding(positions, width, dtype=dtype)
        self.norm = nn.LayerNorm(width, dtype=dtype)
        self.register_buffer("position_ids", torch.arange(positions)[None, :], persistent=False)
        with torch.no_grad():
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.5, 0.5)

    def forward(self, ids, types):
        summed = self.words(ids) + self.types(types)
        summed += self.positions(self.position_ids[:, : ids.shape[1]])
        return self.norm(summed)


class ScaledLookup(nn.Module):
    """A transformer's token embedding scaled by sqrt(width), plus a learnt offset: one pointwise kernel."""

    def __init__(self, vocabulary=40, width=20):
        super().__init__()
        self.table = nn.Embedding(vocabulary, width)
        self.offset = nn.Parameter(torch.randn(width))

    def forward(self, ids):
        return self.table(ids) * width_scale(self.table) + self.offset


def width_scale(table: nn.Embedding) -> float:
    return table.embedding_dim**0.5


def run(load_program, device, model, example, test, *, tolerance=1e-5):
    """Compile `model` at `example`, run it at `test`; returns (program, ours, PyTorch's)."""
    model = model.eval().to(device)
    graph = capture(model, tuple(value.to(device) for value in example))
    program = compile_with(graph)
    with torch.no_grad():
        expected = model(*(value.to(device) for value in test))
        actual = getattr(load_program(program), program.forward_function)(model, *(value.to(device) for value in test))
    torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance)
    return program


def ids(*shape, high=50):
    return torch.randint(0, high, shape)


def test_lookups_summed_before_a_layer_norm_are_gathered_by_the_norm_kernel(load_program, device):
    program = run(load_program, device, Embeddings(), (ids(2, 16), ids(2, 16, high=2)), (ids(3, 11), ids(3, 11, high=2)))
    kernel_lines = [line for line in program.schedule.splitlines() if line.startswith("kernel ")]
    assert kernel_lines == [kernel_lines[0]] and kernel_lines[0].startswith("kernel normalize embedding,embedding_1,add")
    # the position lookup (one row of positions, broadcast over the batch) is gathered too, at every element
    assert "embedding_2" in kernel_lines[0] and "keep" not in program.schedule
    assert "aten.embedding.default" in program.replaced_ops
    assert "(an embedding lookup, never stored)" in program.kernel_block


def test_a_norm_kernel_looping_over_chunks_of_its_rows_gathers_each_chunk(load_program, device):
    model = Embeddings(width=40).eval().to(device)
    example = (ids(2, 16).to(device), ids(2, 16, high=2).to(device))
    graph = capture(model, example)
    script = re.sub(r"strategy=\S+ rows=\S+", "strategy=loop16 rows=2", print_schedule(default_schedule(graph)))
    assert "kernel normalize embedding,embedding_1" in script and "strategy=loop16 rows=2" in script
    program = compile_with(graph, script)
    test = (ids(3, 7).to(device), ids(3, 7, high=2).to(device))
    with torch.no_grad():
        actual = getattr(load_program(program), program.forward_function)(model, *test)
        torch.testing.assert_close(actual, model(*test), atol=1e-5, rtol=1e-5)


def test_low_precision_tables_are_gathered_exactly(load_program, device):
    model = Embeddings(dtype=torch.bfloat16)
    run(load_program, device, model, (ids(2, 16), ids(2, 16, high=2)), (ids(4, 9), ids(4, 9, high=2)), tolerance=2e-2)


def test_int32_and_strided_indices_are_read_through_their_strides(load_program, device):
    model = ScaledLookup()
    example = (ids(6, 5, high=40).to(torch.int32),)
    transposed = ids(7, 9, high=40).to(torch.int32).t()  # 9 x 7, not contiguous
    program = run(load_program, device, model, example, (transposed,))
    assert program.schedule.startswith("kernel pointwise embedding,mul,add ")


def test_a_lookup_read_outside_the_kernel_stays_in_pytorch(load_program, device):
    class LookupAlsoReturned(ScaledLookup):
        def forward(self, ids):
            rows = self.table(ids)
            return rows, rows * 2.0 + self.offset

    program = run(load_program, device, LookupAlsoReturned(), (ids(3, 4, high=40),), (ids(5, 2, high=40),))
    assert program.schedule.splitlines()[0] == "keep embedding"


class Pooled(ScaledLookup):
    """Mean pooling of scaled lookups over the sequence (dim 1: not the trailing dim), and a sum of all of them."""

    def forward(self, ids):
        rows = self.table(ids) * 3.0
        return rows.mean(dim=1), (self.table(ids) + self.offset).sum()


class Regressed(ScaledLookup):
    """Lookups as a regression loss's input (a loss kernel's prologue: that template does not gather)."""

    def forward(self, ids, target):
        return nn.functional.l1_loss(self.table(ids), target)


def test_lookups_pooled_by_a_reduction_are_gathered_by_the_reduce_kernel(load_program, device):
    program = run(load_program, device, Pooled(), (ids(3, 4, high=40),), (ids(5, 7, high=40),))
    assert [line.split(" strategy")[0] for line in program.schedule.splitlines()] == [
        "kernel reduce embedding,mul,mean", "kernel reduce embedding_1,add,sum_1"
    ]
    assert "aten.embedding.default" not in program.kept_ops


def test_a_lookup_alone_or_before_a_template_that_does_not_gather_stays_in_pytorch(load_program, device):
    class Alone(ScaledLookup):
        def forward(self, ids):
            return self.table(ids)

    alone = run(load_program, device, Alone(), (ids(3, 4, high=40),), (ids(2, 5, high=40),))
    assert alone.schedule.strip() == "keep embedding"
    regressed = run(
        load_program, device, Regressed(), (ids(3, 4, high=40), torch.randn(3, 4, 20)), (ids(2, 5, high=40), torch.randn(2, 5, 20))
    )
    assert regressed.schedule.splitlines()[0] == "keep embedding"
    assert "kernel loss l1_loss" in regressed.schedule


class Concatenated(ScaledLookup):
    def forward(self, ids, extra):
        return torch.cat([self.table(ids), extra], dim=-1) * 2.0


def test_a_script_gathering_in_another_template_or_storing_a_lookup_is_refused():
    graph = capture(Concatenated().eval(), (ids(3, 4, high=40), torch.randn(3, 4, 5)))
    script = print_schedule(default_schedule(graph)).replace("keep embedding\nkernel copy ", "kernel copy embedding,")
    assert script.startswith("kernel copy embedding,cat,mul ")
    with pytest.raises(ScheduleError, match="gathered only by pointwise, normalize and reduce kernels"):
        compile_with(graph, script)
    lookup_only = capture(ScaledLookup().eval(), (ids(3, 4, high=40),))
    with pytest.raises(ScheduleError, match="read outside the kernel"):
        compile_with(lookup_only, "kernel pointwise embedding block=1024 warps=4\nkernel pointwise mul,add block=1024 warps=4\n")


def test_an_index_outside_the_table_reads_zeros_instead_of_other_memory(load_program, device):
    model = ScaledLookup().eval().to(device)
    graph = capture(model, (ids(3, 4, high=40).to(device),))
    program = compile_with(graph)
    forward = getattr(load_program(program), program.forward_function)
    bad = torch.tensor([[1, 40, -1, 7]], device=device)
    with torch.no_grad():
        result = forward(model, bad)
        offset = model.offset.expand(2, -1)
        torch.testing.assert_close(result[0, 1:3], offset)  # PyTorch raises here; the kernel reads no row
        torch.testing.assert_close(result[0, [0, 3]], model(bad[:, [0, 3]])[0])


class NormPlusLookup(nn.Module):
    """A batch norm whose epilogue adds looked-up rows (a [N, C, H] index into a table of W columns)."""

    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm2d(4)
        self.table = nn.Embedding(10, 5)
        with torch.no_grad():
            self.norm.running_mean.uniform_(-1, 1)
            self.norm.running_var.uniform_(0.5, 2)

    def forward(self, x, ids):
        return self.norm(x) + self.table(ids)


def test_a_batch_norm_gathering_in_its_epilogue_runs_right_on_a_channels_last_input(load_program, device):
    model = NormPlusLookup().eval().to(device)
    graph = capture(model, (torch.randn(2, 4, 3, 5, device=device), ids(2, 4, 3, high=10).to(device)))
    program = compile_with(graph)
    assert program.schedule.startswith("kernel normalize batch_norm,embedding,add ")
    x = torch.randn(3, 4, 2, 5, device=device).to(memory_format=torch.channels_last)
    test_ids = ids(3, 4, 2, high=10).to(device)
    with torch.no_grad():
        actual = getattr(load_program(program), program.forward_function)(model, x, test_ids)
        torch.testing.assert_close(actual, model(x, test_ids), atol=1e-5, rtol=1e-5)
