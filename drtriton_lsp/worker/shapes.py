"""Which input sizes verification runs at: the task's own, reduced ones on CPU, and odd ones.

Only dimensions that `torch.export` proved free (shape symbols) are changed, and a symbol
shared by several inputs changes everywhere at once, so every planned shape is one the model
accepts. Inputs are resized from real `get_inputs()` draws (sliced or tiled), which keeps the
user's value distribution (positive-only inputs stay positive).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

# Under the interpreter every program instance runs in Python: keep each input this small.
CPU_INPUT_ELEMENT_BUDGET = 1 << 15


@dataclass
class InputShapePlan:
    """primary: target shape per input (None = leave as drawn); odd: extra shape sets to try.

    odd_reason: why no odd sizes are tried, when `odd` is empty.
    """

    primary: list[list[int] | None]
    odd: list[list[list[int] | None]] = field(default_factory=list)
    odd_reason: str = ""

    def describe(self, which: str, index: int = 0) -> str:
        shapes = self.primary if which == "primary" else self.odd[index]
        return ", ".join("x".join(str(d) for d in s) if s is not None else "-" for s in shapes) or "no tensors"


def plan_input_shapes(example: list[Any], symbolic: dict[str, Any] | None, *, reduced: bool) -> InputShapePlan:
    """Plan sizes from the example draw and the exported symbolic input shapes (or None)."""
    concrete = [list(v.shape) if isinstance(v, torch.Tensor) else None for v in example]
    if symbolic is None:
        return InputShapePlan(concrete, [], "the task could not be exported with free sizes")
    symbolic_inputs: list[list] = [dims for dims in symbolic["inputs"] if dims is not None]
    ranges: dict[str, list[int | None]] = symbolic.get("ranges", {})
    tensor_shapes = [s for s in concrete if s is not None]
    if len(symbolic_inputs) != len(tensor_shapes):
        return InputShapePlan(concrete, [], "the exported inputs do not line up with get_inputs()")

    values: dict[str, int] = {}
    for dims, shape in zip(symbolic_inputs, tensor_shapes):
        for dim, size in zip(dims or [], shape):
            if isinstance(dim, str):
                values[dim] = size
    if reduced:
        values = _reduce(values, symbolic_inputs, ranges)
    primary = _apply(values, symbolic_inputs, concrete)
    if not values:
        return InputShapePlan(primary, [], "the model fixes every input size")
    odd_values = {name: _odd_size(value, ranges.get(name, [1, None])) for name, value in values.items()}
    if odd_values == values:
        return InputShapePlan(primary, [], "no other size is allowed for the free dimensions")
    return InputShapePlan(primary, [_apply(odd_values, symbolic_inputs, concrete)])


def _reduce(values: dict[str, int], symbolic_inputs: list, ranges: dict) -> dict[str, int]:
    """Halve the largest free sizes until every input fits the CPU budget (or nothing is left to shrink)."""
    values = dict(values)

    def numel(dims) -> int:
        total = 1
        for dim in dims or []:
            total *= values[dim] if isinstance(dim, str) else dim
        return total

    for dims in symbolic_inputs:
        while numel(dims) > CPU_INPUT_ELEMENT_BUDGET:
            free = [d for d in dims or [] if isinstance(d, str) and values[d] // 2 >= _low(ranges, d)]
            if not free:
                break
            largest = max(free, key=lambda d: values[d])
            values[largest] //= 2
    return values


def _odd_size(value: int, bounds: list[int | None]) -> int:
    """A nearby odd size, not a multiple of any block size, inside the symbol's range."""
    low = bounds[0] if bounds and bounds[0] is not None else 1
    high = bounds[1] if len(bounds) > 1 and bounds[1] is not None else None
    for candidate in (value - 1, value + 1, value + 2, value - 3, value + 4):
        if candidate % 2 == 1 and candidate != value and candidate >= max(low, 1) and (high is None or candidate <= high):
            return candidate
    return value


def _low(ranges: dict, name: str) -> int:
    bounds = ranges.get(name)
    return bounds[0] if bounds and bounds[0] is not None else 1


def _apply(values: dict[str, int], symbolic_inputs: list, concrete: list) -> list[list[int] | None]:
    planned: list[list[int] | None] = []
    symbolic_iter = iter(symbolic_inputs)
    for shape in concrete:
        if shape is None:
            planned.append(None)
            continue
        dims = next(symbolic_iter) or []
        planned.append([values[d] if isinstance(d, str) else size for d, size in zip(dims, shape)] or list(shape))
    return planned


def resize_inputs(inputs: list[Any], shapes: list[list[int] | None]) -> list[Any]:
    """Slice or tile each tensor input to its planned shape, as a compact tensor of its own (a slice's view would keep,
    and a saved copy would write, the whole drawn tensor)."""
    resized = []
    for value, shape in zip(inputs, shapes):
        if not isinstance(value, torch.Tensor) or shape is None or list(value.shape) == shape:
            resized.append(value)
            continue
        repeats = [-(-want // have) if have else 1 for want, have in zip(shape, value.shape)]
        tiled = value.repeat(*repeats) if any(r > 1 for r in repeats) else value
        index = tuple(slice(0, want) for want in shape)
        resized.append(tiled[index].clone(memory_format=torch.contiguous_format))
    return resized
