"""The ops fused kernels compute element by element: the elementwise table and the losses with reduction='none'.

Templates render them (`elementwise_lines`) and the planner gives them the pointwise role (`is_fusible`).
"""

from __future__ import annotations

from drtriton_lsp.compiler.elementwise import ELEMENTWISE_OPS, ElementwiseOp, entry_accepts
from drtriton_lsp.compiler.graph import OpGraph, OpNode
from drtriton_lsp.compiler.losses import POINTWISE_LOSS_OPS

FUSIBLE_OPS: dict[str, ElementwiseOp] = {**ELEMENTWISE_OPS, **POINTWISE_LOSS_OPS}


def is_fusible(node: OpNode, graph: OpGraph, *, graph_mutates: bool) -> bool:
    """Whether `node` can run inside a fused kernel with PyTorch's exact semantics (see `entry_accepts`)."""
    entry = FUSIBLE_OPS.get(node.op)
    return entry is not None and entry_accepts(entry, node, graph, graph_mutates=graph_mutates)
