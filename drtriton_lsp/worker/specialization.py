"""What generated kernels are specialised on, recorded at capture as guards the written dispatch checks.

Runs in the worker beside torch.export. The guards (JSON) list every value reachable from the model,
its call and its module's constants that the kernels may depend on; source/dispatch.py writes them.
"""

from __future__ import annotations

import __future__
import enum
import functools
import inspect
import re
import types
from typing import Any

import torch

from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.worker.capture import dtype_name

# Attributes every nn.Module has in its __dict__ (torch's bookkeeping, the training flag): not user values.
_MODULE_BOOKKEEPING = frozenset(vars(torch.nn.Module())) | {"_compiled_call_impl"}
# A plain shape symbol ("s77"); anything else (an expression such as "2*s77") is guarded as a fixed size.
_FREE_SYMBOL = re.compile(r"[a-z]+\d+\Z")
# Objects inside objects are described this deep; deeper ones are compared by type only.
_DEPTH = 4


def record_guards(
    model: torch.nn.Module,
    task_module: types.ModuleType,
    inputs: list[Any],
    graph: OpGraph,
    training_changes_graph: bool,
    is_method: bool,
) -> list[dict[str, Any]]:
    """The guards for a program generated from `graph` (captured from `model` on `inputs`).

    is_method: the target is the model's class (its forward is decorated); otherwise a function
    wrapped in the task's Model, whose own module state is not part of the user's function.
    training_changes_graph: the graph captured in training mode differs from the eval-mode one.
    """
    home = task_module.__name__
    guards: list[dict[str, Any]] = []
    if is_method:
        guards += _module_guards(model, graph, home, training_changes_graph)
    guards += _argument_guards(model, inputs, graph, home)
    guards += _global_guards(task_module, home)
    return guards


def _module_guards(
    model: torch.nn.Module, graph: OpGraph, home: str, training_changes_graph: bool
) -> list[dict[str, Any]]:
    guards: list[dict[str, Any]] = []
    for graph_input in graph.inputs:
        if graph_input.kind in ("parameter", "buffer") and graph_input.spec is not None:
            guards.append({
                "kind": graph_input.kind,
                "name": graph_input.target,
                "dtype": graph_input.spec.dtype,
                "shape": [int(size) for size in graph_input.spec.shape],
            })
    seen_classes: set[type] = set()
    for path, submodule in model.named_modules():
        if path:
            guards.append({"kind": "module", "name": path, "value": encode_value(type(submodule), home)})
        prefix = f"{path}." if path else ""
        for name, value in vars(submodule).items():
            if name not in _MODULE_BOOKKEEPING:
                guards.append({"kind": "attribute", "name": prefix + name, "value": encode_value(value, home)})
        cls = type(submodule)
        if cls.__module__ == home and cls not in seen_classes:
            seen_classes.add(cls)
            for name, value in _class_data(cls):
                guards.append({"kind": "class_attribute", "name": prefix + name, "value": encode_value(value, home)})
    # Two captures prove the bool: equal graphs in both modes make the kernels right in either, as long
    # as every submodule shares the mode (a mixed state was never captured).
    guards.append({"kind": "training", "name": "eval" if training_changes_graph else "uniform"})
    return guards


def _class_data(cls: type) -> list[tuple[str, Any]]:
    """Data a file-defined module class holds as class attributes (methods and descriptors excluded)."""
    found = []
    for klass in cls.__mro__:
        if klass.__module__ != cls.__module__:
            continue
        for name, value in vars(klass).items():
            if name.startswith("__") or callable(value) or isinstance(value, (property, staticmethod, classmethod)):
                continue
            if name not in dict(found):
                found.append((name, value))
    return found


def _argument_guards(model: torch.nn.Module, inputs: list[Any], graph: OpGraph, home: str) -> list[dict[str, Any]]:
    """Tensor arguments: dtype, rank, fixed sizes, shared free sizes and their range; other arguments: value."""
    signature = inspect.signature(model.forward)
    bound = signature.bind(*inputs)
    bound.apply_defaults()
    specs = {g.target: g.spec for g in graph.inputs if g.kind == "user_input" and g.spec is not None}
    guards: list[dict[str, Any]] = []
    symbols: dict[str, list[tuple[str, int]]] = {}
    for name, value in bound.arguments.items():
        if not isinstance(value, torch.Tensor):
            guards.append({"kind": "argument", "name": name, "value": encode_value(value, home)})
            continue
        spec = specs.get(name)
        shape: list[int | None] = []
        for axis, size in enumerate(value.shape):
            dim = spec.shape[axis] if spec is not None and axis < len(spec.shape) else int(size)
            if isinstance(dim, str) and _FREE_SYMBOL.match(dim):
                symbols.setdefault(dim, []).append((name, axis))
                shape.append(None)
            else:
                shape.append(int(size))
        guards.append({"kind": "tensor", "name": name, "dtype": dtype_name(value.dtype), "shape": shape})
    for symbol, places in symbols.items():
        low, high = (graph.symbol_ranges.get(symbol) or [None, None])[:2]
        guards.append({
            "kind": "sizes",
            "symbol": symbol,
            "dims": [list(place) for place in places],
            "low": max(int(low), 0) if low is not None else 0,
            "high": int(high) if high is not None else None,
        })
    return guards


def _global_guards(task_module: types.ModuleType, home: str) -> list[dict[str, Any]]:
    """The task's module-level data (its copied constants): the written file's globals must still hold them."""
    guards = []
    for name, value in vars(task_module).items():
        if name.startswith("__") or isinstance(value, (types.ModuleType, __future__._Feature)) or callable(value):
            continue
        guards.append({"kind": "global", "name": name, "value": encode_value(value, home)})
    return guards


def encode_value(value: Any, home: str, depth: int = 0) -> Any:
    """A value as tagged JSON that source/dispatch.py writes back as Python (see `_python` there).

    home: the task module's name; definitions there belong to the user's file (module null).
    """
    if value is None or type(value) in (bool, int, str):
        return value
    if type(value) is float:
        return {"float": repr(value)}
    if isinstance(value, tuple) and type(value) in (tuple, torch.Size):
        return {"tuple": [encode_value(item, home, depth + 1) for item in value]}
    if type(value) is list:
        return {"list": [encode_value(item, home, depth + 1) for item in value]}
    if type(value) is dict:
        return {"dict": [[encode_value(key, home, depth + 1), encode_value(item, home, depth + 1)] for key, item in value.items()]}
    if isinstance(value, (torch.dtype, torch.layout, torch.memory_format)):
        return {"torch": str(value).removeprefix("torch.")}
    if isinstance(value, torch.device):
        return {"device": str(value)}
    if isinstance(value, functools.partial):
        return {"partial": [
            encode_value(value.func, home, depth + 1),
            encode_value(value.args, home, depth + 1),
            encode_value(value.keywords, home, depth + 1),
        ]}
    if isinstance(value, enum.Enum):
        return {"enum": [*_where(type(value), home), value.name]}
    if isinstance(value, type):
        return {"class": _where(value, home)}
    if isinstance(value, (types.FunctionType, types.BuiltinFunctionType, types.MethodType)) or (
        callable(value) and hasattr(value, "__qualname__") and hasattr(value, "__module__")
    ):
        return {"function": _where(getattr(value, "__func__", value), home)}
    attributes = getattr(value, "__dict__", None)
    if isinstance(attributes, dict) and depth < _DEPTH:
        return {
            "object": _where(type(value), home),
            "attributes": {"dict": [[name, encode_value(item, home, depth + 1)] for name, item in attributes.items()]},
        }
    return {"opaque": _where(type(value), home)}


def _where(definition: Any, home: str) -> list[str | None]:
    """[module or None for the user's file, qualified name]."""
    module = getattr(definition, "__module__", None)
    return [None if module == home else module, getattr(definition, "__qualname__", type(definition).__qualname__)]
