"""The operator registry: every compute op CSP-DAG synthesis may place in a program.

Each `Operator` declares its inputs (ranks, dtype), how to sample its attributes, its symbolic
shape rule (CP-SAT constraints), its parameters, its cost and the PyTorch source it emits.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Callable, Collection, Iterator

from drtriton_training.shapes import Dim, Shape, ShapeModel

# The floating dtypes a program can be synthesized in (`ProgramSynthesizer(dtype=...)`).
FLOAT_DTYPES = ("float32", "float16", "bfloat16")
DTYPE_BYTES = {"float32": 4, "float16": 2, "bfloat16": 2, "int64": 8}


@dataclass(frozen=True)
class TensorInput:
    """One tensor an operator reads: allowed ranks and dtype.

    dtype: "float" (the program's floating dtype) or "int64" (class indices).
    same_rank_as: index of an earlier input whose rank this one must share (cat, losses, ...).
    class_count_of: for an int64 class-index input, (input index, axis) of the dimension that
      holds the number of classes; the generator creates it as `torch.randint(0, classes, ...)`.
    """

    min_rank: int
    max_rank: int
    dtype: str = "float"
    same_rank_as: int | None = None
    class_count_of: tuple[int, int] | None = None


@dataclass
class OpShapes:
    """What a shape rule returns: the output shape, parameter shapes and the FLOP count.

    flops: (coefficient, factors), meaning coefficient * prod(factors); factors are dims.
    values: other solved integers the source needs (e.g. a slice's start).
    """

    output: Shape
    flops: tuple[int, tuple[Dim, ...]]
    parameters: dict[str, Shape] = field(default_factory=dict)
    values: dict[str, Dim] = field(default_factory=dict)


@dataclass(frozen=True)
class Emission:
    """Everything an operator needs to write its line of `forward` (and of `__init__`).

    args: the forward's variable names of the inputs; inputs/output/parameters: solved shapes;
    attribute: the `self.` name of the operator's submodule or parameter, when it has one;
    values: the solved `OpShapes.values`.
    """

    args: tuple[str, ...]
    attrs: dict
    inputs: tuple[tuple[int, ...], ...]
    output: tuple[int, ...]
    parameters: dict[str, tuple[int, ...]]
    attribute: str
    values: dict[str, int] = field(default_factory=dict)


ShapeRule = Callable[[ShapeModel, list[Shape], dict], OpShapes]
AttributeSampler = Callable[[random.Random, tuple[int, ...]], dict]


def no_attributes(rng: random.Random, ranks: tuple[int, ...]) -> dict:
    return {}


@dataclass(frozen=True)
class Operator:
    """A compute op of the registry.

    forward: source of the expression computing the output (in `forward`).
    constructor: source of the `nn.Module` (e.g. `nn.Conv2d(...)`) or `nn.Parameter` stored
      in `__init__`; None for ops without parameters. attribute_prefix names that attribute.
    dtypes: the floating dtypes programs using this op may have; an op is left out of the others
      where PyTorch's CPU kernel lacks that dtype or its own result there misses the exact one by
      more than that dtype's tolerance (the reason is noted where the op is registered).
    """

    name: str
    family: str
    inputs: tuple[TensorInput, ...]
    shape_rule: ShapeRule
    forward: Callable[[Emission], str]
    attributes: AttributeSampler = no_attributes
    constructor: Callable[[Emission], str] | None = None
    attribute_prefix: str = ""
    dtypes: tuple[str, ...] = FLOAT_DTYPES

    def __post_init__(self) -> None:
        if "float32" not in self.dtypes or not set(self.dtypes) <= set(FLOAT_DTYPES):
            raise ValueError(f"operator {self.name!r}: dtypes must include float32 and be among {FLOAT_DTYPES}")

    @property
    def has_parameters(self) -> bool:
        return self.constructor is not None


class OperatorRegistry:
    """Operators by name, in registration order (the order sampling and reports use)."""

    def __init__(self) -> None:
        self._operators: dict[str, Operator] = {}

    def register(self, operator: Operator) -> Operator:
        if operator.name in self._operators:
            raise ValueError(f"operator {operator.name!r} is registered twice")
        self._operators[operator.name] = operator
        return operator

    def __getitem__(self, name: str) -> Operator:
        return self._operators[name]

    def __iter__(self) -> Iterator[Operator]:
        return iter(self._operators.values())

    def __len__(self) -> int:
        return len(self._operators)

    def names(self) -> list[str]:
        return list(self._operators)

    def families(self) -> list[str]:
        return sorted({operator.family for operator in self})

    def choices(
        self,
        dtype: str = "float32",
        families: Collection[str] | None = None,
        exclude_families: Collection[str] = (),
    ) -> list[str]:
        """The ops a program of `dtype` may draw, in registration order.

        families: only these families (None: all); exclude_families: never these. The defaults
        give every op, so `choices()` equals `names()`.
        """
        if dtype not in FLOAT_DTYPES:
            raise ValueError(f"unknown dtype {dtype!r}; synthesis supports {', '.join(FLOAT_DTYPES)}")
        known = set(self.families())
        unknown = (set(families or ()) | set(exclude_families)) - known
        if unknown:
            raise ValueError(f"unknown families {sorted(unknown)}; the registry has {sorted(known)}")
        return [
            operator.name
            for operator in self
            if dtype in operator.dtypes
            and (families is None or operator.family in families)
            and operator.family not in exclude_families
        ]


def pick_axis(rng: random.Random, rank: int) -> int:
    """A dimension index written the way people do: -1 often, else a positive index."""
    axis = rng.randrange(rank)
    return -1 if axis == rank - 1 and rng.random() < 0.7 else axis
