"""ATen op signatures as plain data: the argument names, types and defaults, mutation and aliasing the compiler reads,
sent by the capture worker with the graph, so the language server plans and lowers kernels without importing torch.

An op the capture did not describe (graphs built by tests or the training package, which have torch) is read from
torch's own schema on first use.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ArgumentSchema:
    name: str
    type: str  # as torch writes it: "Tensor", "Scalar", "Optional[Tensor]", "int[]", ...
    kwarg_only: bool
    has_default: bool
    default: Any  # encoded as graph arguments are ({"dtype": ...}, {"list": [...]}, literals)


@dataclass(frozen=True)
class OpSchema:
    arguments: tuple[ArgumentSchema, ...]
    is_mutable: bool
    # per returned value: None (new memory), "read" (a view of an input) or "write" (an input written in place)
    returns_alias: tuple[str | None, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "arguments": [vars(argument) for argument in self.arguments],
            "is_mutable": self.is_mutable,
            "returns_alias": list(self.returns_alias),
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OpSchema:
        return cls(
            arguments=tuple(ArgumentSchema(**argument) for argument in data["arguments"]),
            is_mutable=bool(data["is_mutable"]),
            returns_alias=tuple(data["returns_alias"]),
        )


_known: dict[str, OpSchema | None] = {}


def remember(schemas: dict[str, dict[str, Any] | None]) -> None:
    """Keep the schemas a capture sent ({op: schema JSON, or None for an op that is not ATen's})."""
    for op, data in schemas.items():
        _known[op] = OpSchema.from_json(data) if data is not None else None


def schema_of(op: str) -> OpSchema | None:
    """The schema of "aten.<name>.<overload>": as the capture sent it, else from torch; None for anything else
    (getitem, symbolic ops)."""
    if op not in _known:
        _known[op] = read_from_torch(op)
    return _known[op]


def read_from_torch(op: str) -> OpSchema | None:
    """`op`'s schema read from torch (in a process that has torch: the capture worker, tests, training)."""
    parts = op.split(".")
    if len(parts) != 3 or parts[0] != "aten":
        return None
    import torch

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
    import torch

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
