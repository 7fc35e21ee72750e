"""Decomposed normalisations folded back into the composite ops the compiler's normalize template computes.

Export's functionalisation (worker/in_place.py) and hand-written code can give `_native_batch_norm_legit_no_training`,
`native_layer_norm` or `native_group_norm`: three outputs (the normalised value, the mean, the inverse deviation). When
only the normalised value is read, the op computes exactly what `batch_norm` (inference), `layer_norm` or `group_norm`
computes, which is what the user's module called in the first place.
"""

from __future__ import annotations

import operator
from typing import Any, Callable

import torch

aten = torch.ops.aten


def _batch_norm(args: tuple) -> tuple:
    source, weight, bias, running_mean, running_var, momentum, eps = args
    return (source, weight, bias, running_mean, running_var, False, momentum, eps, torch.backends.cudnn.enabled)


def _layer_norm(args: tuple) -> tuple:
    source, normalized_shape, weight, bias, eps = args
    return (source, normalized_shape, weight, bias, eps, torch.backends.cudnn.enabled)


def _group_norm(args: tuple) -> tuple | None:
    source, weight, bias, batch, channels, spatial, groups, eps = args
    shape = source.meta["val"].shape
    if len(shape) < 2:
        return None
    expected = (shape[0], shape[1], _product(shape[2:]))
    given = tuple(value.meta["val"] if isinstance(value, torch.fx.Node) else value for value in (batch, channels, spatial))
    if [str(value) for value in given] != [str(value) for value in expected]:
        return None  # sizes that do not describe the input: not what group_norm would pass
    return (source, groups, weight, bias, eps, torch.backends.cudnn.enabled)


def _product(sizes) -> Any:
    total = 1
    for size in sizes:
        total = total * size
    return total


# decomposed op -> (the composite op, its arguments from the decomposed op's, or None when they do not match)
COMPOSITES: dict[Any, tuple[Any, Callable[[tuple], tuple | None]]] = {
    aten._native_batch_norm_legit_no_training.default: (aten.batch_norm.default, _batch_norm),
    aten.native_layer_norm.default: (aten.layer_norm.default, _layer_norm),
    aten.native_group_norm.default: (aten.group_norm.default, _group_norm),
}


def fold_decomposed_norms(graph_module: torch.fx.GraphModule) -> list[str]:
    """Replace each decomposed normalisation whose statistics nothing reads by its composite op, in place.

    Returns the names of the composite nodes made (each takes the name export gives a new node of its op).
    """
    graph = graph_module.graph
    made: list[str] = []
    for node in list(graph.nodes):
        if node.op != "call_function" or node.target not in COMPOSITES or node.kwargs:
            continue
        reads = list(node.users)
        if not all(reader.target is operator.getitem for reader in reads):
            continue
        used = [reader for reader in reads if reader.users]
        if any(reader.args[1] != 0 for reader in used):
            continue  # the mean or the inverse deviation is read: the composite op does not return them
        composite, arguments_of = COMPOSITES[node.target]
        arguments = arguments_of(tuple(node.args))
        if arguments is None:
            continue
        with graph.inserting_before(node):
            folded = graph.call_function(composite, arguments)
        folded.meta = dict(node.meta)
        folded.meta["val"] = node.meta["val"][0]
        for reader in reads:
            reader.replace_all_uses_with(folded)
            graph.erase_node(reader)
        graph.erase_node(node)
        made.append(folded.name)
    return made
