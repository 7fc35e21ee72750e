"""Symbolic tensor shapes solved with OR-Tools CP-SAT: the constraint half of CSP-DAG synthesis.

Dimensions are CP-SAT integer variables in [1, 2^15]; operators relate them through linear,
product, division and broadcast constraints, and caps bound tensor sizes and program FLOPs.
"""

from __future__ import annotations

import dataclasses
import math
import random
from dataclasses import dataclass
from typing import Sequence, Union

from ortools.sat.python import cp_model

MAX_DIM = 1 << 15
Dim = Union[cp_model.IntVar, int]
Shape = tuple[Dim, ...]


@dataclass(frozen=True)
class SynthesisLimits:
    """Caps that keep generated programs small enough to run quickly on a CPU.

    max_tensor_elements: every tensor (inputs, outputs, parameters) holds at most this many.
    max_total_elements: the sum over all tensors of the program.
    max_flops: the program's total FLOPs (each operator's cost model, summed).
    solver_time: CP-SAT deterministic time per solve (machine-independent, so results are
      reproducible); a solve that runs out counts as infeasible.
    hint_floor: where in each dimension's log range its random hint starts (0: anywhere from 1; 0.75: the top
      quarter), which sets how large the tensors usually are.
    """

    max_tensor_elements: int = 1 << 16
    max_total_elements: int = 1 << 20
    max_flops: int = 1 << 26
    solver_time: float = 2.0
    hint_floor: float = 0.0

    def scaled(self, factor: int) -> "SynthesisLimits":
        """These caps with every size and the FLOPs `factor` times larger, and (factor > 1) the sizes' hints drawn
        from the top quarter of their log range, so that most tensors are large: a GPU's programs (see RlRecipe's
        program_scale). The solver's time is unchanged."""
        return dataclasses.replace(
            self,
            max_tensor_elements=self.max_tensor_elements * factor,
            max_total_elements=self.max_total_elements * factor,
            max_flops=self.max_flops * factor,
            hint_floor=0.75 if factor > 1 else self.hint_floor,
        )


class ShapeModel:
    """One CP-SAT model over the dimensions of a whole program.

    Built afresh by replaying the DAG (`CspDag.replay`), so a rejected candidate operator
    leaves no trace. Every dimension created here gets a random *hint* (log-uniform below a
    size that keeps a tensor of its rank under the element cap); together with a seeded,
    randomized single-worker search this picks a random feasible solution, reproducibly.
    """

    def __init__(self, limits: SynthesisLimits, hint_rng: random.Random | None = None):
        self.limits = limits
        self.model = cp_model.CpModel()
        self.dims: list[cp_model.IntVar] = []
        self._numels: list[Dim] = []
        self._flops: list[Dim] = []
        self._hint_rng = hint_rng

    def dim(self, rank: int = 1, low: int = 1, high: int = MAX_DIM) -> cp_model.IntVar:
        """A fresh dimension of a tensor whose rank is `rank` (the rank only shapes the hint)."""
        var = self.model.NewIntVar(low, high, f"d{len(self.dims)}")
        self.dims.append(var)
        if self._hint_rng is not None:
            top = math.log2(self.limits.max_tensor_elements) / max(rank, 1)
            hint = int(round(2 ** self._hint_rng.uniform(self.limits.hint_floor * top, top)))
            self.model.AddHint(var, min(max(hint, low), high))
        return var

    def shape(self, rank: int) -> Shape:
        return tuple(self.dim(rank) for _ in range(rank))

    def equal(self, first: Dim, second: Dim) -> None:
        if isinstance(first, int) and isinstance(second, int):
            if first != second:
                self.infeasible()
            return
        self.model.Add(first == second)

    def require(self, constraint: cp_model.BoundedLinearExpression | bool) -> None:
        """Add a linear (in)equality such as `dims[0] >= 2`."""
        if isinstance(constraint, bool):
            if not constraint:
                self.infeasible()
            return
        self.model.Add(constraint)

    def infeasible(self) -> None:
        self.model.AddBoolOr([])

    def product(self, factors: Sequence[Dim], bound: int) -> Dim:
        """A value equal to the product of `factors`, constrained to at most `bound`."""
        constant = math.prod(f for f in factors if isinstance(f, int))
        variables = [f for f in factors if not isinstance(f, int)]
        if constant > bound:
            self.infeasible()
            return constant
        if not variables:
            return constant
        accumulated: Dim = variables[0]
        for factor in variables[1:]:
            # Every partial product is also <= bound, because all dimensions are >= 1.
            partial = self.model.NewIntVar(1, bound, "")
            self.model.AddMultiplicationEquality(partial, [accumulated, factor])
            accumulated = partial
        if constant == 1:
            return accumulated
        scaled = self.model.NewIntVar(1, bound, "")
        self.model.Add(scaled == constant * accumulated)
        return scaled

    def floor_div(self, numerator: cp_model.LinearExprT, divisor: int) -> Dim:
        """floor(numerator / divisor) for a numerator that must be >= 0."""
        if isinstance(numerator, int):
            if numerator < 0:
                self.infeasible()
            return max(numerator, 0) // divisor
        self.model.Add(numerator >= 0)
        quotient = self.model.NewIntVar(0, MAX_DIM, "")
        self.model.AddDivisionEquality(quotient, numerator, divisor)
        return quotient

    def output(self, expression: cp_model.LinearExprT) -> Dim:
        """A new dimension equal to a linear expression (which must land in [1, 2^15])."""
        if isinstance(expression, int):
            if not 1 <= expression <= MAX_DIM:
                self.infeasible()
            return expression
        var = self.model.NewIntVar(1, MAX_DIM, "")
        self.model.Add(var == expression)
        return var

    def broadcast(self, first: Shape, second: Shape) -> Shape:
        """PyTorch broadcasting: align from the right; each pair is equal or one side is 1."""
        rank = max(len(first), len(second))
        padded_first = (1,) * (rank - len(first)) + tuple(first)
        padded_second = (1,) * (rank - len(second)) + tuple(second)
        result: list[Dim] = []
        for left, right in zip(padded_first, padded_second):
            if isinstance(left, int) and left == 1:
                result.append(right)
            elif isinstance(right, int) and right == 1:
                result.append(left)
            else:
                result.append(self._broadcast_pair(left, right))
        return tuple(result)

    def _broadcast_pair(self, left: Dim, right: Dim) -> Dim:
        out = self.model.NewIntVar(1, MAX_DIM, "")
        same, left_one, right_one = (self.model.NewBoolVar("") for _ in range(3))
        self.model.AddBoolOr([same, left_one, right_one])
        self.model.Add(left == right).OnlyEnforceIf(same)
        self.model.Add(out == left).OnlyEnforceIf(same)
        self.model.Add(left == 1).OnlyEnforceIf(left_one)
        self.model.Add(out == right).OnlyEnforceIf(left_one)
        self.model.Add(right == 1).OnlyEnforceIf(right_one)
        self.model.Add(out == left).OnlyEnforceIf(right_one)
        return out

    def tensor(self, shape: Shape) -> None:
        """Register a tensor of the program: its element count is capped."""
        self._numels.append(self.product(shape, self.limits.max_tensor_elements))

    def cost(self, coefficient: int, factors: Sequence[Dim]) -> None:
        """Register one operator's FLOPs, coefficient * prod(factors), against the FLOP cap."""
        self._flops.append(self.product((coefficient, *factors), self.limits.max_flops))

    def solve(self, seed: int) -> cp_model.CpSolver | None:
        """Solve with the caps; returns the solver holding a solution, or None when infeasible."""
        if self._numels:
            self.model.Add(sum(self._numels) <= self.limits.max_total_elements)
        if self._flops:
            self.model.Add(sum(self._flops) <= self.limits.max_flops)
        solver = cp_model.CpSolver()
        solver.parameters.num_workers = 1
        solver.parameters.random_seed = seed % (1 << 31)
        solver.parameters.randomize_search = True
        solver.parameters.max_deterministic_time = self.limits.solver_time
        status = solver.Solve(self.model)
        if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            return None
        return solver


def concrete(shape: Shape, solver: cp_model.CpSolver) -> tuple[int, ...]:
    """The solved sizes of a symbolic shape."""
    return tuple(d if isinstance(d, int) else int(solver.Value(d)) for d in shape)
