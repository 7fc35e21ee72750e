"""ATen op signatures read from torch, where torch is: the capture sends them with its graph, so the compiler (which
never imports torch) plans and lowers in the caller; processes that build graphs themselves hand it this reader.
"""

from __future__ import annotations

from typing import Any

import torch

from drtriton_lsp.compiler.aten_schemas import ArgumentSchema, OpSchema
from drtriton_lsp.compiler.graph import OpGraph


def schemas_of(graph: OpGraph) -> dict[str, dict[str, Any] | None]:
    """The schemas of the graph's ops as the capture sends them (aten_schemas.remember reads them back)."""
    schemas = {op: read_schema(op) for op in dict.fromkeys(node.op for node in graph.nodes)}
    return {op: schema.to_json() if schema is not None else None for op, schema in schemas.items()}


def read_schema(op: str) -> OpSchema | None:
    """The schema of "aten.<name>.<overload>" as torch declares it; None for anything else (getitem, symbolic ops)."""
    parts = op.split(".")
    if len(parts) != 3 or parts[0] != "aten":
        return None
    packet = getattr(torch.ops.aten, parts[1], None)
    overload = getattr(packet, parts[2], None) if packet is not None else None
    if overload is None:
        return None
    schema = overload._schema
    arguments = tuple(
        ArgumentSchema(
            name=argument.name,
            type=str(argument.type),
            kwarg_only=argument.kwarg_only,
            has_default=argument.has_default_value(),
            default=encoded_constant(argument.default_value) if argument.has_default_value() else None,
        )
        for argument in schema.arguments
    )
    returns_alias = tuple(
        None if value.alias_info is None else ("write" if value.alias_info.is_write else "read")
        for value in schema.returns
    )
    return OpSchema(arguments=arguments, is_mutable=schema.is_mutable, returns_alias=returns_alias)


def encoded_constant(value: Any) -> Any:
    """A constant as graphs hold it: torch's dtypes, devices, layouts and memory formats as tagged strings, lists
    as {"list": [...]}, literals as they are (the capture encodes graph arguments with it too)."""
    if isinstance(value, (list, tuple)):
        return {"list": [encoded_constant(item) for item in value]}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, torch.layout):
        return {"layout": str(value).removeprefix("torch.")}
    if isinstance(value, torch.memory_format):
        return {"memory_format": str(value).removeprefix("torch.")}
    return value
