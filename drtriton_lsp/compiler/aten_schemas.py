"""ATen op signatures as plain data: the argument names, types and defaults, mutation and aliasing the compiler reads,
sent by the capture worker with the graph, so the compiler plans and lowers kernels without importing torch.

An op the capture did not describe (graphs built by tests or the training package, which have torch) is read by the
reader such a process installs (`read_unknown_ops_with(worker.op_schemas.read_schema)`); without one it is an error.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable


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
_read_unknown_op: Callable[[str], OpSchema | None] | None = None


def remember(schemas: dict[str, dict[str, Any] | None]) -> None:
    """Keep the schemas a capture sent ({op: schema JSON, or None for an op that is not ATen's})."""
    for op, data in schemas.items():
        _known[op] = OpSchema.from_json(data) if data is not None else None


def read_unknown_ops_with(reader: Callable[[str], OpSchema | None]) -> None:
    """Read the schema of an op no capture described with `reader` (a process with torch: tests, training)."""
    global _read_unknown_op
    _read_unknown_op = reader


def schema_of(op: str) -> OpSchema | None:
    """The schema of "aten.<name>.<overload>": as the capture sent it, else from the installed reader; None for
    anything else (getitem, symbolic ops). Raises LookupError for an ATen op nothing describes."""
    if op not in _known:
        parts = op.split(".")
        if len(parts) != 3 or parts[0] != "aten":
            return None
        if _read_unknown_op is None:
            raise LookupError(
                f"no schema for {op}: plan graphs with the schemas their capture sent (aten_schemas.remember), or, "
                "where torch is, install worker.op_schemas.read_schema with aten_schemas.read_unknown_ops_with"
            )
        _known[op] = _read_unknown_op(op)
    return _known[op]
