"""In-place ops that write only memory the forward allocated itself, rewritten into functional ops after export.

Model code writes into fresh intermediates (`nn.ReLU(inplace=True)`, `out += identity`, `out[:, :k] = part`); the
compiler keeps every anchor in PyTorch while a graph writes in place. Two rewrites, both exact:
- `relu_(v)` becomes `relu(v)` when no other name for `v`'s memory can see the difference: `v` was allocated by the
  op that made it, nothing read it through an alias, and nothing reads it afterwards (names and ops unchanged);
- otherwise, when every write lands in memory an op of the forward allocated (a slice of a fresh tensor), and every
  alias of that memory is one export tracks, export's own functionalisation (`run_decompositions({})`) replaces the
  writes (`copy_` into a slice becomes `slice_scatter`); it also decomposes a few composite ops (batch norm becomes
  `_native_batch_norm_legit_no_training`, an eval-mode dropout a `clone`).
Writes into inputs, parameters or buffers, or into memory an op may share without saying so, stay as they are.
"""

from __future__ import annotations

import operator
from typing import Any

import torch
from torch._guards import detect_fake_mode
from torch.multiprocessing.reductions import StorageWeakRef

# Composite ops (no kernel of their own: what they return is whatever their decomposition returns, so their schema
# says nothing about aliasing) whose result is always a new tensor, checked against their decompositions in torch 2.13.
ALLOCATING_COMPOSITES = frozenset({
    "aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::conv_transpose1d", "aten::conv_transpose2d",
    "aten::conv_transpose3d", "aten::batch_norm", "aten::layer_norm", "aten::group_norm", "aten::instance_norm",
    "aten::rms_norm", "aten::linear", "aten::matmul", "aten::softmax", "aten::log_softmax", "aten::relu6",
    "aten::scaled_dot_product_attention",
})  # fmt: skip
# ops with a kernel of their own that return an alias of their input although their schema does not say so
UNANNOTATED_ALIASES = frozenset({"aten::_unsafe_view"})


def functionalize_in_place_ops(graph_module: torch.fx.GraphModule) -> list[str]:
    """Rewrite, in place, each in-place op whose written value nothing else can observe into its functional op.

    Returns the names of the nodes rewritten. A chain (`x = bn(x); x.relu_(); x += y`) is rewritten link by link.
    """
    nodes = list(graph_module.graph.nodes)
    position = {node: index for index, node in enumerate(nodes)}
    rewritten: list[str] = []
    for node in nodes:
        functional = functional_form(node)
        if functional is None:
            continue
        written = node.args[0]
        if not isinstance(written, torch.fx.Node) or not allocates(written):
            continue
        if not _only_earlier_plain_readers(written, node, position):
            continue
        if not _same_result(node, functional):
            continue
        node.target = functional
        rewritten.append(node.name)
    return rewritten


def functional_program(exported: Any) -> Any | None:
    """`exported` with every in-place op replaced by export's functionalisation, or None when some write could reach
    memory the forward did not allocate (an input, a parameter, a buffer, or an untracked alias), or when the
    functional program still writes somewhere."""
    if not _writes_only_fresh_memory(exported.graph):
        return None
    try:
        functional = exported.run_decompositions({})
    except Exception:  # noqa: BLE001 - a program export cannot functionalise keeps its in-place ops
        return None
    signature = functional.graph_signature
    if signature.user_inputs_to_mutate or signature.buffers_to_mutate or writes_in_place(functional.graph):
        return None
    return functional


def writes_in_place(graph: torch.fx.Graph) -> bool:
    """Whether some op of the graph writes into one of its arguments."""
    return any(_is_mutable(node.target) for node in graph.nodes if node.op == "call_function")


def _writes_only_fresh_memory(graph: torch.fx.Graph) -> bool:
    """Whether each in-place op writes memory first returned by an op that allocates it, and every op reading that
    memory either returns an alias export tracks (a view, the in-place op itself) or returns new memory."""
    storages = {node: _storages(node.meta.get("val")) for node in graph.nodes}
    owner: dict[Any, torch.fx.Node] = {}
    for node in graph.nodes:
        for storage in storages[node]:
            owner.setdefault(storage, node)
    written: set[Any] = set()
    for node in graph.nodes:
        if node.op != "call_function" or not _is_mutable(node.target):
            continue
        for argument in _written_arguments(node):
            if not isinstance(argument, torch.fx.Node) or not storages[argument]:
                return False
            written |= storages[argument]
    for storage in written:
        if not allocates(owner[storage]):
            return False
    for node in graph.nodes:
        if not storages[node] & written:
            continue
        for reader in node.users:
            if reader.op == "output" or storages[reader] & storages[node]:
                continue
            if not (allocates(reader) or _returns_no_tensor(reader.target) or _returns_only_written(reader.target)):
                return False
    return True


def _storages(value: Any) -> set[Any]:
    """Identities of the memory a (fake) tensor value, or each tensor of a tuple value, lives in."""
    if isinstance(value, torch.Tensor):
        return {StorageWeakRef(value.untyped_storage())}
    if isinstance(value, (list, tuple)):
        return set().union(*(_storages(item) for item in value)) if value else set()
    return set()


def _is_mutable(target: Any) -> bool:
    return isinstance(target, torch._ops.OpOverload) and target._schema.is_mutable


def _written_arguments(node: torch.fx.Node) -> list[Any]:
    """The node's arguments its schema marks as written."""
    schema = node.target._schema
    found = []
    for index, argument in enumerate(schema.arguments):
        if argument.alias_info is None or not argument.alias_info.is_write:
            continue
        if argument.name in node.kwargs:
            found.append(node.kwargs[argument.name])
        elif index < len(node.args):
            found.append(node.args[index])
    return found


def _returns_only_written(target: Any) -> bool:
    """An in-place op: whatever it returns is what it wrote, so it aliases nothing it only read."""
    if not _is_mutable(target):
        return False
    return all(result.alias_info is not None and result.alias_info.is_write for result in target._schema.returns)


def functional_form(node: torch.fx.Node) -> torch._ops.OpOverload | None:
    """`aten.relu.default` for a node calling `aten.relu_.default` (it writes its first argument and returns it)
    when that functional overload takes the same arguments; None for every other node."""
    target = node.target
    if not isinstance(target, torch._ops.OpOverload) or not node.args:
        return None
    schema = target._schema
    written = [argument for argument in schema.arguments if argument.alias_info is not None and argument.alias_info.is_write]
    if len(written) != 1 or written[0] is not schema.arguments[0] or len(schema.returns) != 1:
        return None
    returned = schema.returns[0].alias_info
    if returned is None or not returned.is_write or set(returned.before_set) != set(written[0].alias_info.before_set):
        return None
    packet = target.overloadpacket.__name__
    if not packet.endswith("_") or packet.startswith("_"):
        return None
    functional_packet = getattr(torch.ops.aten, packet[:-1], None)
    functional = getattr(functional_packet, target._overloadname, None) if functional_packet is not None else None
    if not isinstance(functional, torch._ops.OpOverload) or functional._schema.is_mutable:
        return None
    if _signature(functional._schema) != _signature(schema) or functional._schema.returns[0].alias_info is not None:
        return None
    return functional


def allocates(node: torch.fx.Node) -> bool:
    """Whether the node's tensor results are always new memory no other graph value shares (for a tuple read, the
    producing op's results)."""
    if node.op != "call_function":
        return False
    target = node.target
    if target is operator.getitem:
        producer = node.args[0]
        return isinstance(producer, torch.fx.Node) and producer.op == "call_function" and _fresh_results(producer.target)
    return _fresh_results(target)


def _fresh_results(target: Any) -> bool:
    if not isinstance(target, torch._ops.OpOverload):
        return False
    schema = target._schema
    if schema.is_mutable or any(result.alias_info is not None for result in schema.returns):
        return False
    name = schema.name
    if name in UNANNOTATED_ALIASES:
        return False
    composite = torch._C._dispatch_has_kernel_for_dispatch_key(schema.name + _overload_suffix(schema), "CompositeImplicitAutograd")
    return not composite or name in ALLOCATING_COMPOSITES


def _overload_suffix(schema) -> str:
    return f".{schema.overload_name}" if schema.overload_name else ""


def _only_earlier_plain_readers(written: torch.fx.Node, in_place: torch.fx.Node, position: dict) -> bool:
    """Every other op reading `written` runs before the in-place op and returns no alias of it (so none sees the
    write); the graph's output counts as a reader after it."""
    for reader in written.users:
        if reader is in_place:
            continue
        if reader.op != "call_function" or position[reader] > position[in_place]:
            return False
        if not _returns_no_tensor(reader.target) and not allocates(reader):
            return False
    return True


def _returns_no_tensor(target: Any) -> bool:
    """Shape reads and metadata asserts: nothing they return can alias a tensor."""
    if not isinstance(target, torch._ops.OpOverload):
        return False
    return not any(isinstance(result.type, (torch.TensorType, torch.ListType, torch.OptionalType)) for result in target._schema.returns)


def _same_result(node: torch.fx.Node, functional: torch._ops.OpOverload) -> bool:
    """Whether the functional op gives a result of the in-place op's dtype, shape and strides (an in-place op keeps
    its target's dtype where the functional op would promote it, e.g. `eq_` against `eq`)."""
    expected = node.meta.get("val")
    if not isinstance(expected, torch.Tensor):
        return False

    def fake(value: Any) -> Any:
        if isinstance(value, torch.fx.Node):
            return value.meta.get("val")
        if isinstance(value, (list, tuple)):
            return type(value)(fake(item) for item in value)
        return value

    args, kwargs = fake(node.args), {key: fake(value) for key, value in node.kwargs.items()}
    mode = detect_fake_mode([expected])
    if mode is None:
        return False
    try:
        with mode:
            result = functional(*args, **kwargs)
    except Exception:  # noqa: BLE001 - an op that cannot run on fake tensors is left as it was
        return False
    if not isinstance(result, torch.Tensor) or result.dtype != expected.dtype:
        return False
    return _sizes(result.shape) == _sizes(expected.shape) and _sizes(result.stride()) == _sizes(expected.stride())


def _sizes(values) -> list[str]:
    return [str(value) for value in values]


def _signature(schema) -> list[tuple[str, str, bool]]:
    return [(argument.name, str(argument.type), argument.kwarg_only) for argument in schema.arguments]
