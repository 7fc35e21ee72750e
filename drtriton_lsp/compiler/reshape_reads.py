"""Reshapes read inside fused kernels: a kernel reads `x.reshape(shape)` through `x`'s own strides, never copying it.

PyTorch's reshape copies a tensor its strides cannot view in the new shape (a slice, a transpose); a kernel can read
the elements where they are instead: each dim of the new shape is a few levels of `x`'s dims (merged dims, or part of
a split one), and the kernel splits the dim's index into those levels. Pixel shuffles are the same read: a reshape of
a permuted view of `x`. `reshapes_in_kernel` says which ops may be read so, `level_counts` how many levels each dim
gets, and READ_LEVELS_SOURCE is the host function a launch wrapper calls to find the levels at run time.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from drtriton_lsp.compiler.graph import OpGraph, OpNode, example_dim
from drtriton_lsp.compiler.partition import broadcasts_to

PIXEL_SHUFFLES = ("aten.pixel_shuffle.default", "aten.pixel_unshuffle.default")
RESHAPE_OPS = ("aten.reshape.default", "aten.flatten.using_ints") + PIXEL_SHUFFLES
# levels a kernel reads one dim in at most: a dim merging more of the source's dims is reshaped by PyTorch first
MOST_LEVELS = 4


def reshape_source(node: OpNode) -> str | None:
    """The value a reshape op reads (its first argument), or None when it is not a graph value."""
    source = node.args[0] if node.args else None
    return source["ref"] if isinstance(source, dict) and "ref" in source else None


def level_counts(source_shape: list[int], target_shape: list[int]) -> list[int] | None:
    """How many levels each dim of `target_shape` reads `source_shape`'s elements in, when each target dim merges
    whole source dims or is part of one source dim (sizes of 1 aside); None when a dim does neither (a [6, 4] read
    as [4, 6]), or a size is 0."""
    if 0 in source_shape or 0 in target_shape or math.prod(source_shape) != math.prod(target_shape):
        return None
    pending = [size for size in source_shape if size != 1]
    counts = []
    left = 1  # what remains of the source dim being split among target dims
    for wanted in target_shape:
        levels = 0
        while wanted > 1:
            if left == 1:
                left = pending.pop(0)
            if left % wanted == 0:  # the target dim is the outer part of what remains of this source dim
                left //= wanted
                wanted = 1
            elif wanted % left == 0:  # the target dim merges the rest of this source dim with the next ones
                wanted //= left
                left = 1
            else:
                return None
            levels += 1
        counts.append(max(levels, 1))
    return counts if left == 1 and not pending else None


def reshapes_in_kernel(node: OpNode, graph: OpGraph, root_is_computed: Callable[[str], bool]) -> bool:
    """Whether a kernel may read `node`'s result through its source's strides: a reshape, flatten or pixel (un)shuffle
    (by an int factor) whose example shapes split into levels (`level_counts`), at most MOST_LEVELS a dim.

    Its source may come from another kernel only in a shape the partition can never fuse the reshape with (one that
    does not broadcast to the reshape's): a kernel reads it from memory, so it must be stored before that kernel
    runs. root_is_computed: whether a kernel computes a value, or the value a view of it reads."""
    source = reshape_source(node)
    if node.op not in RESHAPE_OPS or source is None:
        return False
    spec = graph.spec_of(source)
    if spec is None or spec.rank == 0 or node.spec.rank == 0:
        return False
    if root_is_computed(source) and broadcasts_to(tuple(spec.shape), tuple(node.spec.shape)):
        return False
    if node.op in PIXEL_SHUFFLES and (spec.rank < 3 or not _int_factor(node)):
        return False
    counts = example_level_counts(node, graph)
    return counts is not None and max(counts) <= MOST_LEVELS


def _int_factor(node: OpNode) -> int | None:
    """A pixel (un)shuffle's factor when it is a positive int literal."""
    factor = node.args[1] if len(node.args) > 1 else None
    return factor if isinstance(factor, int) and not isinstance(factor, bool) and factor > 0 else None


def _shuffle_order(node: OpNode, rank: int) -> tuple[int, ...]:
    """The permutation of a pixel (un)shuffle's source view (batch dims, then the six `_shuffled_view` dims) that
    lists its elements in the result's order."""
    batch = tuple(range(rank - 3))
    first = rank - 3
    if node.op == "aten.pixel_shuffle.default":  # [C, r, r, H, W] -> [C, H, r, W, r]
        return batch + (first, first + 3, first + 1, first + 4, first + 2)
    return batch + (first, first + 2, first + 4, first + 1, first + 3)  # [C, H, r, W, r] -> [C, r, r, H, W]


def example_level_counts(node: OpNode, graph: OpGraph) -> list[int] | None:
    """`level_counts` of a reshape op at the example sizes."""
    source_shape = [example_dim(size, graph.symbol_hints) for size in graph.spec_of(reshape_source(node)).shape]
    target_shape = [example_dim(size, graph.symbol_hints) for size in node.spec.shape]
    if node.op in PIXEL_SHUFFLES:
        factor = _int_factor(node)
        *batch, channels, height, width = source_shape
        if node.op == "aten.pixel_shuffle.default":
            if channels % (factor * factor):
                return None
            split = [channels // (factor * factor), factor, factor, height, width]
        else:
            if height % factor or width % factor:
                return None
            split = [channels, height // factor, factor, width // factor, factor]
        viewed = batch + split
        source_shape = [viewed[dim] for dim in _shuffle_order(node, len(source_shape))]
    return level_counts(source_shape, target_shape)


def source_expression(node: OpNode, graph: OpGraph, source: str) -> str:
    """A wrapper expression for the tensor `node` reshapes: `source` (a wrapper variable) itself, or for a pixel
    (un)shuffle a permuted view of it whose elements, in order, are the result's."""
    if node.op not in PIXEL_SHUFFLES:
        return source
    factor, rank = _int_factor(node), graph.spec_of(reshape_source(node)).rank
    split = f"unflatten(-3, (-1, {factor}, {factor}))" if node.op == "aten.pixel_shuffle.default" else (
        f"unflatten(-1, (-1, {factor})).unflatten(-3, (-1, {factor}))"
    )
    return f"{source}.{split}.permute{_shuffle_order(node, rank)}"


def target_shape_expression(node: OpNode, graph: OpGraph, source: str, value: Callable[[Any], str]) -> str:
    """A wrapper expression for the shape `node` reshapes `source` (a wrapper variable) to: reshape's own shape
    argument (graph values in it through `value`; -1 stays for the host function to infer), flatten's or a pixel
    (un)shuffle's."""
    if node.op in PIXEL_SHUFFLES:
        factor = _int_factor(node)
        channels, height, width = (f"{source}.shape[{dim}]" for dim in (-3, -2, -1))
        if node.op == "aten.pixel_shuffle.default":
            return f"[*{source}.shape[:-3], {channels} // {factor * factor}, {height} * {factor}, {width} * {factor}]"
        return f"[*{source}.shape[:-3], {channels} * {factor * factor}, {height} // {factor}, {width} // {factor}]"
    if node.op != "aten.flatten.using_ints":
        return value(node.args[1])
    rank = graph.spec_of(reshape_source(node)).rank
    start = node.args[1] if len(node.args) > 1 else node.kwargs.get("start_dim", 0)
    end = node.args[2] if len(node.args) > 2 else node.kwargs.get("end_dim", -1)
    start, end = start % rank, end % rank
    return f"[*{source}.shape[:{start}], -1, *{source}.shape[{end + 1}:]]"


# the host function behind every reshaped read, emitted once into a program whose kernels read one (its name is
# formatted in as {name})
READ_LEVELS_SOURCE = '''def {name}(source, shape, counts):
    """How a kernel reads `source.reshape(shape)` without the copy: (tensor, reshaped shape, sizes, strides), where
    each dim d of the reshaped value is len(strides[d]) == counts[d] levels, outermost first: the index i of dim d is
    at sum(((i // (sizes[d][k + 1] * ... )) % sizes[d][k]) * strides[d][k]). When `source`'s strides cannot be read
    in that many levels, the tensor is `source.reshape(shape)` itself (PyTorch's copy) and each dim one level."""
    shape = list(shape)
    if -1 in shape:
        known = 1
        for size in shape:
            known *= size if size != -1 else 1
        shape[shape.index(-1)] = source.numel() // known if known else 0
    # the source's dims without those of size 1, neighbours that are one run of memory merged
    runs = []
    for size, stride in zip(source.shape, source.stride()):
        if size == 1:
            continue
        if runs and runs[-1][1] == size * stride:
            runs[-1] = (runs[-1][0] * size, stride)
        else:
            runs.append((size, stride))
    sizes, strides = [], []
    left, left_stride, position = 1, 0, 0
    for wanted, count in zip(shape, counts):
        dim_sizes, dim_strides = [], []
        while wanted > 1 and len(dim_sizes) <= count:
            if left == 1:
                if position == len(runs):
                    break
                left, left_stride = runs[position]
                position += 1
            if left % wanted == 0:  # the outer part of this run
                left //= wanted
                dim_sizes.append(wanted)
                dim_strides.append(left_stride * left)
                wanted = 1
            elif wanted % left == 0:  # this run whole, then the next
                wanted //= left
                dim_sizes.append(left)
                dim_strides.append(left_stride)
                left = 1
            else:
                break
        if wanted != 1 or len(dim_sizes) > count:
            break
        padding = count - len(dim_sizes)
        sizes.append([1] * padding + dim_sizes)
        strides.append([0] * padding + dim_strides)
    else:
        if left == 1 and position == len(runs) and source.numel() > 0:
            return source, torch.Size(shape), sizes, strides
    copied = source.reshape(shape)
    sizes = [[1] * (count - 1) + [size] for size, count in zip(copied.shape, counts)]
    strides = [[0] * (count - 1) + [stride] for stride, count in zip(copied.stride(), counts)]
    return copied, copied.shape, sizes, strides

'''
