"""Reshapes read inside fused kernels through their source's strides: `x[:, :-1].contiguous().view(-1, V)` copies nothing.

The host function's levels are checked against PyTorch's own reshape on many layouts; whole modules are captured at
one size and run at another (and on strided inputs), on the GPU or under Triton's interpreter, against PyTorch.
"""

from __future__ import annotations

import itertools

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from drtriton_lsp.compiler.errors import ScheduleError
from drtriton_lsp.compiler.planner import launched_steps, default_schedule
from drtriton_lsp.compiler.reshape_reads import READ_LEVELS_SOURCE, level_counts
from schedule_helpers import capture, compile_with

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")  # the interpreter computes masked-off lanes too


@pytest.mark.parametrize(
    "source, target, counts",
    [
        ((4, 7, 32), (28, 32), [2, 1]),  # merged leading dims
        ((4, 7, 32), (4, 224), [1, 2]),  # merged trailing dims
        ((2, 3, 4, 5), (120,), [4]),
        ((12, 5), (3, 4, 5), [1, 1, 1]),  # a split: each part is one level
        ((2, 1, 6), (2, 6, 1), [1, 1, 1]),  # sizes of 1 add no level
        ((6, 4), (4, 6), None),  # neither merged nor split
        ((2, 3), (3, 2), None),
        ((0, 4), (4, 0), None),
    ],
)
def test_level_counts_merge_whole_dims_and_split_one(source, target, counts):
    assert level_counts(list(source), list(target)) == counts


def read_levels():
    namespace = {"torch": torch}
    exec(READ_LEVELS_SOURCE.format(name="read_levels"), namespace)
    return namespace["read_levels"]


def gathered(tensor, sizes, strides):
    """The elements the levels address, in the reshaped shape: each level as a dim of a strided view."""
    flat_sizes = [size for dim in sizes for size in dim]
    flat_strides = [stride for dim in strides for stride in dim]
    view = torch.as_strided(tensor, flat_sizes, flat_strides, tensor.storage_offset())
    return view.reshape([int(torch.tensor(dim).prod()) for dim in sizes])


def layouts():
    """Sources of several layouts: contiguous, sliced, transposed, expanded, with sizes of 1."""
    base = torch.arange(2 * 5 * 6 * 4, dtype=torch.float32).reshape(2, 5, 6, 4)
    yield base, (10, 24)
    yield base[:, :-1], (8, 6, 4)  # causal-LM shift: the rows of a slice
    yield base[:, :-1], (48, 4)
    yield base.transpose(1, 2), (2, 6, 20)  # attention heads merged back
    yield base.permute(0, 2, 1, 3), (12, 20)
    yield base[..., ::2], (60, 2)
    yield base[:, 1:2], (2, 24)
    yield torch.randn(3, 1, 4).expand(3, 5, 4), (15, 4)
    yield base.transpose(0, 3), (4, 30, 2)
    yield base.transpose(1, 2)[:, :, 1:], (2, 6, 2, 2, 4)


@pytest.mark.parametrize("case", range(10))
def test_the_levels_address_exactly_the_elements_pytorch_reshapes(case):
    source, shape = list(layouts())[case]
    counts = level_counts(list(source.shape), list(shape))
    tensor, reshaped_shape, sizes, strides = read_levels()(source, shape, counts)
    expected = source.reshape(shape)
    assert tuple(reshaped_shape) == expected.shape
    assert [len(dim) for dim in sizes] == counts
    torch.testing.assert_close(gathered(tensor, sizes, strides), expected, rtol=0, atol=0)
    assert tensor.data_ptr() == source.data_ptr(), "a layout the levels can read is never copied"


def test_minus_one_in_the_shape_is_inferred():
    source = torch.randn(3, 7, 5)[:, 1:]
    tensor, shape, sizes, strides = read_levels()(source, [-1, 5], [2, 1])
    assert shape == torch.Size([18, 5])
    torch.testing.assert_close(gathered(tensor, sizes, strides), source.reshape(-1, 5), rtol=0, atol=0)


def test_a_layout_needing_more_levels_than_the_kernel_has_is_copied_by_pytorch():
    source = torch.randn(4, 6, 5).transpose(0, 1)  # merging its leading dims needs two levels
    tensor, shape, sizes, strides = read_levels()(source, [24, 5], [1, 1])
    assert tensor.is_contiguous() and tensor.data_ptr() != source.data_ptr()
    assert sizes == [[24], [5]]
    torch.testing.assert_close(gathered(tensor, sizes, strides), source.reshape(24, 5), rtol=0, atol=0)


def test_a_reshape_that_is_not_a_merge_or_split_at_run_time_is_copied():
    source = torch.randn(2, 3)[:, :]  # [2, 3] read as [3, 2]: the kernel's single levels cannot
    tensor, shape, sizes, strides = read_levels()(source.t(), [2, 3], [1, 1])
    torch.testing.assert_close(gathered(tensor, sizes, strides), source.t().reshape(2, 3), rtol=0, atol=0)


class CausalLMLoss(nn.Module):
    """A language model's training loss: logits and labels shifted by one position, then cross-entropy."""

    def forward(self, logits, labels):
        shift_logits = logits[..., :-1, :].contiguous().view(-1, logits.shape[-1]).float()
        shift_labels = labels[..., 1:].contiguous().view(-1)
        return F.cross_entropy(shift_logits, shift_labels, ignore_index=-100)


class HeadsMerged(nn.Module):
    """Attention's output heads merged back into the width, scaled and offset."""

    def __init__(self, width=24):
        super().__init__()
        self.offset = nn.Parameter(torch.randn(width))

    def forward(self, heads):
        batch, _, tokens, _ = heads.shape
        return heads.transpose(1, 2).reshape(batch, tokens, -1) * 0.5 + self.offset


class FlattenedNorm(nn.Module):
    """A layer norm over channels-by-pixels flattened from a permuted map."""

    def __init__(self, width=24):
        super().__init__()
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(x.permute(0, 2, 1, 3).flatten(2))


class ReshapedSum(nn.Module):
    def forward(self, x):
        return x.transpose(1, 2).reshape(x.shape[0], x.shape[2], -1).sum(-1)


def run(load_program, device, model, example, test, *, tolerance=1e-5):
    """Compile `model` at `example`, run it at `test`; returns the program."""
    model = model.eval().to(device)
    graph = capture(model, tuple(value.to(device) for value in example))
    program = compile_with(graph)
    module = load_program(program)
    for inputs in test:
        inputs = tuple(value.to(device) for value in inputs)
        with torch.no_grad():
            expected = model(*inputs)
            actual = getattr(module, program.forward_function)(model, *inputs)
        torch.testing.assert_close(actual, expected, atol=tolerance, rtol=tolerance)
    return program


def test_a_shifted_cross_entropy_reads_the_logits_slice_without_the_copy(load_program, device):
    labels = lambda *shape: torch.randint(-1, 16, shape).masked_fill_(torch.rand(shape) < 0.2, -100)  # noqa: E731
    example = (torch.randn(2, 8, 16).bfloat16(), labels(2, 8))
    tests = [(torch.randn(3, 9, 16).bfloat16(), labels(3, 9).clamp(min=-100).abs() % 16)]
    program = run(load_program, device, CausalLMLoss(), example, tests)
    kernel_lines = [line for line in program.schedule.splitlines() if line.startswith("kernel ")]
    assert kernel_lines[0].startswith("kernel loss view,to,cross_entropy_loss ")
    # the logits are read through the slice's strides; only the labels' small reshape (the loss's target, read per
    # row) stays PyTorch's, reported as the view (or copy) it is, not as compute left in PyTorch
    assert program.schedule.startswith("keep view_1\n")
    assert program.kept_ops == () and "aten.reshape.default" in program.view_ops
    assert "reshaped, read in levels of its strides" in program.kernel_block


def test_heads_merged_back_are_read_through_the_transpose(load_program, device):
    heads = lambda batch, tokens: torch.randn(batch, 4, tokens, 6)  # noqa: E731
    tests = [(heads(3, 5),), (heads(2, 7).transpose(0, 1).contiguous().transpose(0, 1),), (heads(1, 3),)]
    program = run(load_program, device, HeadsMerged(), (heads(2, 8),), tests)
    assert program.schedule.startswith("kernel pointwise reshape,mul,add ")
    assert program.kept_ops == ()


def test_a_reshaped_read_of_a_contiguous_source_takes_the_flat_offsets(load_program, device):
    class Flattened(nn.Module):
        def forward(self, x):
            return x.reshape(x.shape[0], -1) * 2.0

    program = run(load_program, device, Flattened(), (torch.randn(4, 3, 5),), [(torch.randn(2, 3, 5),)])
    assert "_IS_CONTIGUOUS=reshape_read.is_contiguous()" in program.kernel_block.replace(" ", "")


def test_a_norm_over_flattened_permuted_dims_reads_them_in_place(load_program, device):
    maps = lambda batch, pixels: torch.randn(batch, 4, pixels, 6)  # noqa: E731
    program = run(load_program, device, FlattenedNorm(), (maps(2, 5),), [(maps(3, 7),)], tolerance=1e-4)
    assert program.schedule.startswith("kernel normalize flatten,")


def test_a_reduction_over_a_reshape_reads_it_in_place(load_program, device):
    program = run(load_program, device, ReshapedSum(), (torch.randn(2, 3, 4, 5),), [(torch.randn(3, 2, 6, 5),)])
    assert program.schedule.startswith("kernel reduce reshape,")


def test_a_reshape_a_matmul_reads_stays_pytorchs_view(load_program, device):
    class MergedProjection(HeadsMerged):
        def __init__(self):
            super().__init__()
            self.projection = nn.Linear(24, 8)

        def forward(self, heads):
            batch, _, tokens, _ = heads.shape
            return self.projection(heads.transpose(1, 2).reshape(batch, tokens, -1))

    program = run(load_program, device, MergedProjection(), (torch.randn(2, 4, 8, 6),), [(torch.randn(3, 4, 5, 6),)])
    assert "keep reshape" not in program.schedule and "aten.reshape.default" in program.view_ops


def test_a_returned_reshape_is_pytorchs_and_its_readers_still_fuse(load_program, device):
    class AlsoReturned(nn.Module):
        def forward(self, x):
            merged = x.transpose(0, 1).reshape(x.shape[1], -1)
            return merged, merged.sigmoid()

    program = run(load_program, device, AlsoReturned(), (torch.randn(4, 6, 3),), [(torch.randn(2, 5, 3),)])
    assert "aten.reshape.default" in program.view_ops and "aten.sigmoid.default" in program.replaced_ops


def test_a_script_putting_a_reshape_in_a_kernel_that_cannot_read_it_is_refused(device):
    graph = capture(CausalLMLoss(), (torch.randn(2, 8, 16).bfloat16(), torch.randint(0, 16, (2, 8))))
    script = "kernel loss view,to,view_1,cross_entropy_loss reduction=single block=1 columns=16 warps=1\n"
    with pytest.raises(ScheduleError, match=r"view_1 \(a reshape\) is read in place only by .*loss's target"):
        compile_with(graph, script)


@pytest.mark.parametrize("start, end", list(itertools.combinations(range(3), 2)))
def test_flatten_reads_any_run_of_dims(load_program, device, start, end):
    class Flatten(nn.Module):
        def forward(self, x):
            return x.permute(2, 0, 1).flatten(start, end) + 1.0

    run(load_program, device, Flatten(), (torch.randn(3, 4, 5),), [(torch.randn(2, 6, 7),)])


class ShuffleUpsampler(nn.Module):
    """ESPCN's upsampler: a convolution to 4x the channels, pixel shuffle, per-channel PReLU."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(4, 16, 3, padding=1)
        self.shuffle = nn.PixelShuffle(2)
        self.prelu = nn.PReLU(4, 0.1)

    def forward(self, x):
        return self.prelu(self.shuffle(self.conv(x)))


def test_a_pixel_shuffle_is_read_where_the_convolution_left_it(load_program, device):
    program = run(load_program, device, ShuffleUpsampler(), (torch.randn(2, 4, 6, 6),), [(torch.randn(3, 4, 5, 7),)])
    assert program.schedule.startswith("keep conv2d\nkernel pointwise pixel_shuffle,")
    assert program.kept_ops == ("aten.conv2d.default",)


def test_a_pixel_unshuffle_of_a_slice_is_read_in_place(load_program, device):
    class Unshuffled(nn.Module):
        def forward(self, x):
            return F.pixel_unshuffle(x[:, :, 1:], 3).sigmoid()

    program = run(load_program, device, Unshuffled(), (torch.randn(2, 3, 7, 6),), [(torch.randn(1, 2, 10, 9),)])
    assert program.schedule.startswith("kernel pointwise pixel_unshuffle,sigmoid ")


def test_a_pixel_shuffle_read_by_a_kept_op_stays_pytorchs_copy(load_program, device):
    class ShuffledThenPooled(nn.Module):
        def forward(self, x):
            return F.max_pool2d(F.pixel_shuffle(x, 2), 2, 2, 1).relu()

    program = run(load_program, device, ShuffledThenPooled(), (torch.randn(2, 8, 4, 4),), [(torch.randn(1, 8, 3, 5),)])
    assert "aten.pixel_shuffle.default" not in program.view_ops


def test_a_reshape_fusing_with_the_kernel_that_computes_its_source_is_never_read_in_place(load_program, device):
    class Regrouped(nn.Module):
        def forward(self, x):
            doubled = x * 2.0
            return doubled.reshape(1, *doubled.shape).exp()

    program = run(load_program, device, Regrouped(), (torch.randn(4, 6),), [(torch.randn(3, 5),)])
    assert "aten.reshape.default" in program.view_ops


def test_a_batch_norm_adding_a_reshape_runs_right_on_a_channels_last_input(load_program, device):
    class NormPlusFeatures(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.BatchNorm2d(4)
            with torch.no_grad():
                self.norm.running_mean.uniform_(-1, 1)
                self.norm.running_var.uniform_(0.5, 2)

        def forward(self, x, features):
            return self.norm(x) + features.transpose(1, 2).reshape(x.shape)

    example = (torch.randn(2, 4, 3, 5), torch.randn(2, 15, 4))
    test = (torch.randn(3, 4, 2, 6).to(memory_format=torch.channels_last), torch.randn(3, 12, 4))
    program = run(load_program, device, NormPlusFeatures(), example, [test])
    assert program.schedule.startswith("kernel normalize batch_norm,reshape,add ")


def test_a_kept_reshape_is_reported_as_a_view_and_costs_no_step_of_the_replay_rule(load_program, device):
    class PooledHead(nn.Module):
        """A CNN head: global average pool, flatten, eval-mode dropout, classifier."""

        def __init__(self):
            super().__init__()
            self.dropout = nn.Dropout(0.2)
            self.classifier = nn.Linear(6, 3)

        def forward(self, x):
            pooled = F.adaptive_avg_pool2d(x.relu(), 1)
            return self.classifier(self.dropout(pooled.reshape(pooled.shape[0], -1)))

    program = run(load_program, device, PooledHead(), (torch.randn(2, 6, 4, 4),), [(torch.randn(3, 6, 5, 3),)])
    assert "keep reshape" in program.schedule and "aten.reshape.default" not in program.kept_ops
    assert "aten.reshape.default" in program.view_ops and "aten.reshape.default" not in program.kept_copies
    graph = capture(PooledHead().eval(), (torch.randn(2, 6, 4, 4),))
    steps = default_schedule(graph).steps
    assert len(launched_steps(steps, graph)) == len(steps) - 1
