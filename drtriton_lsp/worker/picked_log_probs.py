"""Log-probabilities picked at targets, `log_softmax(x, -1).gather(-1, t[..., None])`, captured as the cross-entropy
they are: `-cross_entropy(x moved to [N, classes, ...], t, reduction="none")[..., None]`.

Training loops and RL code take per-token log-probabilities so; eager writes the whole log-softmax (one value per
class) only to read one value a position. As a cross-entropy, the compiler's loss template computes each position's
logsumexp and its target's logit in one pass and writes one value a position (compiler/templates/loss.py), with
PyTorch's own formula, x[t] - max - log(sum(exp(x - max))), rounded as log_softmax rounds it. Only where exact: float
logits of 2 dims or more with the classes last, the log-softmax read by nothing else, one int64 target a position
(gather reads the positions its index has, so the loss reads those). A negative target reads 0 where gather raises
(an invalid input either way).
"""

from __future__ import annotations

import torch

aten = torch.ops.aten

FLOAT_DTYPES = (torch.float32, torch.float16, torch.bfloat16, torch.float64)


def fold_picked_log_probs(graph_module: torch.fx.GraphModule) -> list[str]:
    """Rewrite, in place, each gather of one class per position from a log-softmax over the classes that only it reads
    into the negated per-position cross-entropy; returns the names of the cross-entropy nodes made."""
    graph = graph_module.graph
    made: list[str] = []
    for gather in list(graph.nodes):
        targets = _picked_targets(gather)
        if targets is None:
            continue
        log_softmax, index = gather.args[0], gather.args[2]
        logits, index_value = log_softmax.args[0], index.meta["val"]
        rank = index_value.dim()
        # a cast the log-softmax alone reads goes after the views below, so the loss kernel can take it as its prologue
        cast = logits if _cast_read_once(logits) else None
        if cast is not None:
            logits = cast.args[0]
        with graph.inserting_before(gather):
            if targets is index:  # an index made elsewhere: one class a position, its column dropped
                targets = _node(graph, aten.squeeze.dim, (index, -1), index.meta, index_value.squeeze(-1))
            for dim in range(rank - 1):
                if str(index_value.shape[dim]) != str(logits.meta["val"].shape[dim]):
                    # gather reads the positions its index has (no more than the logits hold): so does the loss
                    size = _node(graph, aten.sym_size.int, (index, dim), index.meta, index_value.shape[dim])
                    logits = _node(
                        graph, aten.slice.Tensor, (logits, dim, 0, size), logits.meta,
                        logits.meta["val"].narrow(dim, 0, index_value.shape[dim]),
                    )
            if rank > 2:  # the cross-entropy takes the classes at dim 1: a view with them moved there
                order = [0, rank - 1, *range(1, rank - 1)]
                logits = _node(
                    graph, aten.permute.default, (logits, order), logits.meta, logits.meta["val"].permute(order)
                )
            if cast is not None:
                dtype = cast.meta["val"].dtype
                logits = _node(graph, cast.target, (logits, *cast.args[1:]), cast.meta, logits.meta["val"].to(dtype))
            picked_positions = gather.meta["val"].squeeze(-1)
            loss = _node(
                graph, aten.cross_entropy_loss.default, (logits, targets, None, 0), gather.meta, picked_positions
            )
            picked = _node(graph, aten.neg.default, (loss,), gather.meta, picked_positions)
            column = _node(graph, aten.unsqueeze.default, (picked, -1), gather.meta, gather.meta["val"])
        gather.replace_all_uses_with(column)
        graph.erase_node(gather)
        graph.erase_node(log_softmax)
        if cast is not None:
            graph.erase_node(cast)
        if not index.users and index.op == "call_function":
            graph.erase_node(index)
        made.append(loss.name)
    if made:
        graph_module.recompile()
    return made


def _node(graph: torch.fx.Graph, target, args: tuple, meta: dict, value) -> torch.fx.Node:
    """A new call of `target` named after its op, with `meta` (where it came from) and the fake `value` it gives."""
    node = graph.create_node("call_function", target, args, name=target.__name__.split(".")[0])
    node.meta = {**meta, "val": value}
    return node


def _cast_read_once(node: torch.fx.Node) -> bool:
    """Whether `node` is a dtype cast (`x.float()`) of a graph value that only one op reads."""
    return (
        node.op == "call_function"
        and node.target is aten.to.dtype
        and not node.kwargs
        and len(node.users) == 1
        and isinstance(node.args[0], torch.fx.Node)
    )


def _picked_targets(gather: torch.fx.Node) -> torch.fx.Node | None:
    """The per-position targets (an int64 node, the index without its last dim) of a
    `gather(log_softmax(x, -1), -1, index)` the rewrite applies to: the unsqueezed targets, or the index itself (the
    caller squeezes it); None when it does not apply."""
    if gather.op != "call_function" or gather.target is not aten.gather.default or len(gather.args) != 3:
        return None
    if gather.kwargs.get("sparse_grad", False):
        return None
    log_softmax, dim, index = gather.args
    if not (isinstance(log_softmax, torch.fx.Node) and isinstance(index, torch.fx.Node)):
        return None
    if log_softmax.target is not aten.log_softmax.int or len(log_softmax.users) != 1 or log_softmax.kwargs:
        return None
    if len(log_softmax.args) > 2 and log_softmax.args[2] is not None:
        return None  # log_softmax(x, dim, dtype): a cast first
    logits, index_value = log_softmax.args[0].meta.get("val"), index.meta.get("val")
    if logits is None or index_value is None or logits.dim() < 2 or logits.dtype not in FLOAT_DTYPES:
        return None
    rank = logits.dim()
    if dim % rank != rank - 1 or log_softmax.args[1] % rank != rank - 1:
        return None  # both over the classes, the last dim
    if index_value.dim() != rank or index_value.dtype is not torch.int64 or str(index_value.shape[-1]) != "1":
        return None
    unsqueezed = index.target is aten.unsqueeze.default and index.args[1] in (rank - 1, -1)
    return index.args[0] if unsqueezed and isinstance(index.args[0], torch.fx.Node) else index
