"""CSP-DAG synthesis: grow a random operator DAG, keep shapes symbolic, solve them with CP-SAT.

A `CspDag` is the list of steps (create ops for inputs, compute ops); `ProgramSynthesizer`
adds k uniformly chosen compute ops (difficulty level k) and checks feasibility after each.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from dataclasses import dataclass, field
from typing import Collection

from drtriton_training.operators import default_registry
from drtriton_training.registry import DTYPE_BYTES, OperatorRegistry, OpShapes
from drtriton_training.shapes import Shape, ShapeModel, SynthesisLimits, concrete

MAX_ATTEMPTS = 8
MAX_NEW_INPUT_RANK = 4


class SynthesisError(RuntimeError):
    """No feasible placement of the chosen operator was found within the attempts allowed."""


@dataclass(frozen=True)
class CreateOp:
    """A program input: `torch.randn` in the program's float dtype, or `torch.randint` class indices.

    class_count_of: (tensor id, axis) whose solved size is the number of classes.
    """

    rank: int
    dtype: str = "float32"
    class_count_of: tuple[int, int] | None = None


@dataclass(frozen=True)
class ComputeOp:
    """A registry operator applied to earlier tensors (ids are step indices)."""

    operator: str
    attrs: dict
    inputs: tuple[int, ...]


@dataclass
class Replay:
    """The CP-SAT model of a DAG plus the symbolic shape of every tensor and op."""

    model: ShapeModel
    shapes: list[Shape]
    op_shapes: dict[int, OpShapes]


@dataclass
class CspDag:
    """A program as data: steps in creation order; step i produces tensor i."""

    steps: list[CreateOp | ComputeOp] = field(default_factory=list)

    def replay(self, registry: OperatorRegistry, limits: SynthesisLimits, hint_seed: int) -> Replay:
        """Build the CP-SAT model afresh; the same steps and seed always give the same model."""
        model = ShapeModel(limits, random.Random(hint_seed))
        shapes: list[Shape] = []
        op_shapes: dict[int, OpShapes] = {}
        for index, step in enumerate(self.steps):
            if isinstance(step, CreateOp):
                shape = model.shape(step.rank)
            else:
                result = registry[step.operator].shape_rule(model, [shapes[i] for i in step.inputs], step.attrs)
                op_shapes[index] = result
                shape = result.output
                for parameter in result.parameters.values():
                    model.tensor(parameter)
                model.cost(*result.flops)
            model.tensor(shape)
            shapes.append(shape)
        return Replay(model, shapes, op_shapes)

    def consumed(self) -> set[int]:
        return {i for step in self.steps if isinstance(step, ComputeOp) for i in step.inputs}

    def outputs(self) -> list[int]:
        """Compute results that nothing reads: what `forward` returns."""
        used = self.consumed()
        return [i for i, step in enumerate(self.steps) if isinstance(step, ComputeOp) and i not in used]


@dataclass
class Program:
    """A solved CSP-DAG: its steps, concrete shapes and metadata; `emit.render_program` writes it."""

    dag: CspDag
    shapes: list[tuple[int, ...]]
    parameters: dict[int, dict[str, tuple[int, ...]]]
    values: dict[int, dict[str, int]]
    level: int
    seed: int
    flops: int
    bytes: int
    dtype: str = "float32"

    @property
    def compute_steps(self) -> list[tuple[int, ComputeOp]]:
        return [(i, s) for i, s in enumerate(self.dag.steps) if isinstance(s, ComputeOp)]

    def canonical_hash(self) -> str:
        """A hash that ignores the order ops were generated in (see `canonical_form`)."""
        text = json.dumps(self.canonical_form(), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    def canonical_form(self) -> list:
        """The DAG serialized in a canonical topological order.

        Each tensor gets a Merkle digest (operator, attributes, shape and the digests of its
        inputs); ready ops are emitted smallest digest first and inputs are numbered by first
        use, so two generation orders of one DAG serialize identically.
        """
        steps = self.dag.steps
        digest: list[str] = []
        for index, step in enumerate(steps):
            if isinstance(step, CreateOp):
                payload = ["input", step.dtype, self.shapes[index]]
            else:
                payload = [step.operator, step.attrs, self.shapes[index], [digest[i] for i in step.inputs]]
            digest.append(hashlib.sha256(json.dumps(payload, sort_keys=True).encode()).hexdigest())
        pending = {i for i, step in enumerate(steps) if isinstance(step, ComputeOp)}
        number: dict[int, int] = {}
        form = []
        while pending:
            ready = [i for i in pending if all(j not in pending for j in steps[i].inputs)]
            chosen = min(ready, key=lambda i: digest[i])
            pending.remove(chosen)
            refs = []
            for j in steps[chosen].inputs:
                if j not in number:
                    number[j] = len(number)
                refs.append(number[j])
            number[chosen] = len(number)
            step = steps[chosen]
            form.append([step.operator, step.attrs, list(self.shapes[chosen]), refs])
        leaves = sorted((number[i], steps[i].dtype, list(self.shapes[i])) for i in number if isinstance(steps[i], CreateOp))
        return [leaves, form]


class ProgramSynthesizer:
    """Generates programs of a given level: k compute ops drawn uniformly from the registry.

    An op is kept once chosen (so operator frequencies stay uniform): when its inputs make the
    constraints infeasible, new inputs are drawn, with more fresh tensors on each attempt.
    dtype: the float dtype of every input, parameter and result (ops the registry marks unfit
    for it are never drawn); families / exclude_families: restrict the ops drawn by family.
    """

    def __init__(
        self,
        registry: OperatorRegistry | None = None,
        limits: SynthesisLimits | None = None,
        *,
        dtype: str = "float32",
        families: Collection[str] | None = None,
        exclude_families: Collection[str] = (),
    ):
        self.registry = registry or default_registry()
        self.limits = limits or SynthesisLimits()
        self.dtype = dtype
        self.operator_names = self.registry.choices(dtype, families, exclude_families)
        if not self.operator_names:
            raise ValueError(f"no operator is left for dtype {dtype} with these family choices")

    def synthesize(self, level: int, seed: int, operators: list[str] | None = None) -> Program:
        """A level-`level` program; `operators` fixes the op sequence (else uniform choice)."""
        unavailable = sorted(set(operators or ()) - set(self.operator_names))
        if unavailable:
            raise ValueError(f"operators {unavailable} are not drawn for dtype {self.dtype} with these families")
        rng = random.Random(seed)
        dag = CspDag()
        ranks: list[int] = []
        solution = None
        for step in range(level):
            name = operators[step] if operators else rng.choice(self.operator_names)
            for attempt in range(MAX_ATTEMPTS):
                fresh = 1.0 if attempt == MAX_ATTEMPTS - 1 else 0.15 + 0.2 * attempt
                candidate = self._extend(dag, ranks, name, rng, fresh)
                replay = candidate.replay(self.registry, self.limits, seed)
                solver = replay.model.solve(seed)
                if solver is not None:
                    dag, solution = candidate, (replay, solver)
                    ranks = [len(shape) for shape in replay.shapes]
                    break
            else:
                raise SynthesisError(f"no feasible placement for {name!r} at step {step} (seed {seed})")
        return self._program(dag, solution, level, seed)

    def _extend(self, dag: CspDag, ranks: list[int], name: str, rng: random.Random, fresh: float) -> CspDag:
        operator = self.registry[name]
        steps = list(dag.steps)
        ranks = list(ranks)
        frontier = set(dag.outputs())
        chosen: list[int] = []
        for slot, spec in enumerate(operator.inputs):
            if spec.dtype == "int64":
                source, axis = spec.class_count_of
                steps.append(CreateOp(spec.min_rank, "int64", (chosen[source], axis)))
                ranks.append(spec.min_rank)
                chosen.append(len(steps) - 1)
                continue
            if spec.same_rank_as is not None:
                low = high = ranks[chosen[spec.same_rank_as]]
            else:
                low, high = spec.min_rank, spec.max_rank
            candidates = [
                i for i, step in enumerate(steps)
                if low <= ranks[i] <= high and not (isinstance(step, CreateOp) and step.dtype != self.dtype)
            ]
            preferred = [i for i in candidates if i in frontier] if slot == 0 else []
            if preferred and rng.random() >= fresh:
                chosen.append(rng.choice(preferred))
            elif candidates and rng.random() >= fresh:
                chosen.append(rng.choice(candidates))
            else:
                rank = rng.randint(low, max(low, min(high, MAX_NEW_INPUT_RANK)))
                steps.append(CreateOp(rank, self.dtype))
                ranks.append(rank)
                chosen.append(len(steps) - 1)
        attrs = operator.attributes(rng, tuple(ranks[i] for i in chosen))
        steps.append(ComputeOp(name, attrs, tuple(chosen)))
        return CspDag(steps)

    def _program(self, dag: CspDag, solution, level: int, seed: int) -> Program:
        replay, solver = solution
        shapes = [concrete(shape, solver) for shape in replay.shapes]
        parameters, values = {}, {}
        flops = total_bytes = 0
        for index, result in replay.op_shapes.items():
            parameters[index] = {name: concrete(shape, solver) for name, shape in result.parameters.items()}
            values[index] = {name: concrete((value,), solver)[0] for name, value in result.values.items()}
            coefficient, factors = result.flops
            flops += coefficient * math.prod(concrete(tuple(factors), solver))
            step = dag.steps[index]
            touched = [shapes[i] for i in step.inputs] + list(parameters[index].values()) + [shapes[index]]
            dtypes = [dag.steps[i].dtype if isinstance(dag.steps[i], CreateOp) else self.dtype for i in step.inputs]
            total_bytes += sum(
                math.prod(shape) * DTYPE_BYTES[dtype]
                for shape, dtype in zip(touched, dtypes + [self.dtype] * (len(touched) - len(dtypes)))
            )
        return Program(dag, shapes, parameters, values, level, seed, flops, total_bytes, self.dtype)
