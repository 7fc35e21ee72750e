"""Embedding lookups read inside fused kernels: rows of a table gathered at integer indices, as a load.

`gathers_in_kernel` says which embedding ops may run as such a load; templates read a gathered value through
`DomainReads` (given the kernel's `read_members`, which also holds reshapes read in place: compiler/reshape_reads.py)
and never compute it as an op, so the looked-up rows are never stored.
"""

from __future__ import annotations

from typing import Sequence

from drtriton_lsp.compiler.graph import OpGraph, OpNode
from drtriton_lsp.compiler.partition import group_inputs
from drtriton_lsp.compiler.reshape_reads import RESHAPE_OPS

GATHER_OPS = ("aten.embedding.default",)
TABLE_DTYPES = ("float32", "float16", "bfloat16")
INDEX_DTYPES = ("int64", "int32")


def lookup_operands(node: OpNode) -> tuple[str, str] | None:
    """(table, indices) of an embedding op whose two operands are graph values, else None."""
    if node.op not in GATHER_OPS or len(node.args) < 2:
        return None
    table, indices = node.args[0], node.args[1]
    if not (isinstance(table, dict) and "ref" in table and isinstance(indices, dict) and "ref" in indices):
        return None
    return table["ref"], indices["ref"]


def gathers_in_kernel(node: OpNode, graph: OpGraph, computed_by_kernels: set[str]) -> bool:
    """Whether a kernel may read `node`'s result as a gather: an embedding of a 2-d float table at integer indices,
    neither of which a kernel computes (so the lookup can always be moved back out of a kernel in front of it).

    The forward's other arguments (padding_idx, scale_grad_by_freq, sparse) change only the gradient.
    """
    operands = lookup_operands(node)
    if operands is None:
        return False
    table, indices = (graph.spec_of(value) for value in operands)
    return (
        table is not None
        and indices is not None
        and table.rank == 2
        and table.dtype in TABLE_DTYPES
        and indices.dtype in INDEX_DTYPES
        and node.spec.dtype == table.dtype
        and not computed_by_kernels.intersection(operands)
    )


def gather_members(nodes: dict[str, OpNode], members: Sequence[str]) -> tuple[str, ...]:
    """The members of a kernel that are embedding lookups (read as gathers, never computed as ops)."""
    return tuple(member for member in members if nodes[member].op in GATHER_OPS)


def read_members(nodes: dict[str, OpNode], members: Sequence[str]) -> tuple[str, ...]:
    """The members of a kernel read from memory where it needs them, never computed as ops: embedding lookups
    (gathered) and reshapes (`compiler.reshape_reads`)."""
    return tuple(member for member in members if nodes[member].op in GATHER_OPS + RESHAPE_OPS)


def reads_of(nodes: dict[str, OpNode], members: Sequence[str]) -> list[str]:
    """What `members` read from memory, in order of first use: `group_inputs`, except that a read member's value is
    read (through a lookup's table and indices, a reshape's source) instead of computed."""
    read = read_members(nodes, members)
    reads = group_inputs(nodes, [member for member in members if member not in read])
    return reads + [member for member in read if member not in reads]
