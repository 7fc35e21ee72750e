"""A copy made only to be viewed, `x.contiguous().view(shape)`, captured as the reshape it stands for: x.reshape(shape).

Model code writes the copy because `view` refuses strides it cannot view (a slice, a transpose). The reshape computes
the same values, and the compiler may then read them through `x`'s strides inside a kernel instead of copying them
(compiler/reshape_reads.py). Only where nothing can tell the difference: the copy has no other reader, the view is not
returned (a reshape may alias `x` where the copy did not), and nothing in the graph writes in place.
"""

from __future__ import annotations

import torch

from drtriton_lsp.worker.in_place import writes_in_place

aten = torch.ops.aten

VIEWS = (aten.view.default, aten._unsafe_view.default)


def fold_copies_into_reshapes(graph_module: torch.fx.GraphModule) -> list[str]:
    """Rewrite, in place, each `view(contiguous(x), shape)` (or of `clone(x)`) whose copy only the view reads into
    `reshape(x, shape)`; returns the rewritten views' names."""
    graph = graph_module.graph
    if writes_in_place(graph):
        return []
    returned = {value for node in graph.nodes if node.op == "output" for value in node.all_input_nodes}
    rewritten: list[str] = []
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in VIEWS or node in returned:
            continue
        copy = node.args[0]
        if not isinstance(copy, torch.fx.Node) or not _copies(copy) or len(copy.users) != 1:
            continue
        node.target = aten.reshape.default
        node.args = (copy.args[0], node.args[1])
        graph.erase_node(copy)
        rewritten.append(node.name)
    if rewritten:
        graph_module.recompile()
    return rewritten


def _copies(node: torch.fx.Node) -> bool:
    """`contiguous(x)` or `clone(x)`, in any layout: a view reads the same elements of any copy of `x`."""
    return (
        node.op == "call_function"
        and node.target in (aten.contiguous.default, aten.clone.default)
        and isinstance(node.args[0], torch.fx.Node)
    )

