"""The ATen audit: which PyTorch ops a forward really ran, recorded at the dispatcher, below any Python patching.

The judge records the reference's compute ops; the candidate's process records the candidate's, and also guards every
buffer it allocates (sentinel regions before and after, poisoned contents) and tracks which buffers hold values that
Triton computed (rather than copied), so the judge can tell a Triton kernel from a PyTorch result in a Triton wrapper.
"""

from __future__ import annotations

import contextlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from drtriton_lsp.worker.tolerances import tolerance_for

# Ops that move, view, allocate or describe data without computing new values (overload packet names).
MOVEMENT_OPS = frozenset(
    {
        "_reshape_alias", "_to_copy", "_unsafe_view", "alias", "as_strided", "chunk", "clone", "contiguous", "copy",
        "copy_", "detach", "diagonal", "dim", "empty", "empty_like", "empty_strided", "expand", "expand_as",
        "fill", "fill_", "flatten", "full", "full_like", "is_contiguous", "is_same_size", "lift_fresh",
        "lift_fresh_copy", "movedim", "narrow", "new_empty", "new_empty_strided", "new_full", "new_ones", "new_zeros",
        "ones", "ones_like", "permute", "reshape", "resize_", "scalar_tensor", "select", "size", "slice", "split",
        "split_with_sizes", "squeeze", "stride", "sym_numel", "sym_size", "sym_storage_offset", "sym_stride", "t",
        "to", "transpose", "unbind", "unflatten", "unsqueeze", "view", "view_as", "zero_", "zeros", "zeros_like",
        "_local_scalar_dense",
    }
)
# Ops that make a new buffer the caller then fills: the candidate's process guards and poisons these.
UNFILLED_FACTORIES = frozenset({"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided"})
FILLED_FACTORIES = frozenset(
    {"zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "new_zeros", "new_ones", "new_full"}
)
# Ops that overwrite their first argument entirely with values from elsewhere.
OVERWRITING_OPS = frozenset({"copy_", "fill_", "zero_"})

GUARD_BYTES = 64 * 1024
SENTINEL_BYTE = 0xA5


def op_name(func) -> str:
    """`aten.relu.default` for an OpOverload."""
    return str(func)


def _packet(func) -> str:
    return func.overloadpacket.__name__ if hasattr(func, "overloadpacket") else str(func)


def is_compute(func) -> bool:
    return _packet(func) not in MOVEMENT_OPS


class OpRecorder(TorchDispatchMode):
    """Counts the compute ops run inside it (`compute_ops`: "aten.relu.default" -> calls)."""

    def __init__(self) -> None:
        super().__init__()
        self.compute_ops: Counter[str] = Counter()
        self.paused = False

    @classmethod
    def _should_skip_dynamo(cls) -> bool:
        """No TorchDynamo guard around `__torch_dispatch__`: a plain Python function, not a wrapper that imports
        TorchDynamo (seconds, at a candidate process's start) and adds a call to every op recorded."""
        return False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.paused:
            return func(*args, **kwargs)
        if is_compute(func):
            self.compute_ops[op_name(func)] += 1
        return func(*args, **kwargs)


@dataclass
class GuardedBuffer:
    """A buffer with sentinel regions of `guard` elements before and after the `extent` elements handed out."""

    base: torch.Tensor
    guard: int
    extent: int
    description: str

    def intact(self) -> bool:
        raw = self.base.view(torch.uint8)
        element = self.base.element_size()
        front = raw[: self.guard * element]
        back = raw[(self.guard + self.extent) * element :]
        return bool((front == SENTINEL_BYTE).all()) and bool((back == SENTINEL_BYTE).all())


def storage_extent(size: tuple[int, ...], stride: tuple[int, ...]) -> int:
    """Elements of storage a view of this size and stride spans (0 for an empty tensor)."""
    if any(s == 0 for s in size):
        return 0
    return 1 + sum((s - 1) * abs(st) for s, st in zip(size, stride))


def guarded_buffer(
    shape: tuple[int, ...], stride: tuple[int, ...], dtype: torch.dtype, device: torch.device, description: str,
    registry: list[GuardedBuffer],
) -> torch.Tensor:
    """An uninitialised tensor of this size and stride inside a guarded buffer added to `registry`."""
    element = torch.empty((), dtype=dtype).element_size()
    guard = GUARD_BYTES // element
    extent = storage_extent(shape, stride)
    base = torch.empty(guard + extent + guard, dtype=dtype, device=device)
    base.view(torch.uint8).fill_(SENTINEL_BYTE)
    registry.append(GuardedBuffer(base, guard, extent, description))
    return base.as_strided(shape, stride, guard)


def poison(tensor: torch.Tensor, generator: torch.Generator) -> None:
    """Fill a fresh buffer with random values no correct kernel would leave in an output, drawn from the audit's own
    generator (the candidate's RNG state is untouched), and plausible as leftover memory (no NaN or marker value
    a candidate could test for to learn that it is being verified)."""
    if tensor.is_floating_point() or tensor.is_complex():
        tensor.normal_(0.0, 100.0, generator=generator)
    elif tensor.dtype == torch.bool:
        tensor.copy_(torch.randint(0, 2, tensor.shape, generator=generator, device=tensor.device).bool())
    else:
        tensor.copy_(torch.randint(-1000, 1000, tensor.shape, generator=generator, device=tensor.device))


@dataclass
class CandidateAudit(OpRecorder):
    """What the candidate's forward did, recorded from its process's dispatcher.

    - compute_ops: the PyTorch compute ops it ran outside Triton launches;
    - every buffer allocated by a factory is guarded (see GuardedBuffer) and, when unfilled, poisoned (see poison);
    - made_by_triton: storages (by data pointer) whose values a Triton launch computed, carried through PyTorch ops
      that read them; a launch that only copies values it read carries its sources' state instead;
    - computed_here: storages whose values a Triton launch or a PyTorch compute op computed in the forward (or that
      were derived from such values), not values made elsewhere (plain Python on the host, numpy) and moved in.
    """

    poison_seed: int = 0
    track_triton_values: bool = False
    buffers: list[GuardedBuffer] = field(default_factory=list)
    made_by_triton: dict[int, bool] = field(default_factory=dict)
    computed_here: dict[int, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        OpRecorder.__init__(self)
        self._generators: dict[torch.device, torch.Generator] = {}

    def _generator(self, device: torch.device) -> torch.Generator:
        if device not in self._generators:
            self._generators[device] = torch.Generator(device=device)
            self._generators[device].manual_seed(self.poison_seed)
        return self._generators[device]

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if self.paused:
            return func(*args, **kwargs)
        packet = _packet(func)
        if packet in UNFILLED_FACTORIES or packet in FILLED_FACTORIES:
            with self.pause():
                made = func(*args, **kwargs)
                guarded = guarded_buffer(
                    tuple(made.shape), tuple(made.stride()), made.dtype, made.device,
                    f"{packet} {list(made.shape)} {made.dtype}", self.buffers,
                )
                if packet in UNFILLED_FACTORIES:
                    poison(guarded, self._generator(guarded.device))
                else:
                    guarded.copy_(made)
                del made
            self._mark(guarded, False, False)
            return guarded
        computes = is_compute(func)
        if computes:
            self.compute_ops[op_name(func)] += 1
        result = func(*args, **kwargs)
        if self.track_triton_values:
            self._carry(packet, computes, args, kwargs, result)
        return result

    @contextlib.contextmanager
    def pause(self):
        """Run the audit's own tensor work unrecorded."""
        was, self.paused = self.paused, True
        try:
            yield
        finally:
            self.paused = was

    def _carry(self, packet: str, computes: bool, args, kwargs, result) -> None:
        """A PyTorch op's results hold Triton-computed values when any tensor it read does, and values computed here
        when it computes or any tensor it read holds them; an op that overwrites its first argument takes the state of
        what it wrote there."""
        read = [value for value in _tensors((args, {k: v for k, v in kwargs.items() if k != "out"}))]
        if packet in OVERWRITING_OPS and read:
            source = read[1:] if packet == "copy_" else []
            self._mark(read[0], any(self.holds_triton_values(t) for t in source),
                       any(self.holds_computed_values(t) for t in source))
            return
        triton = any(self.holds_triton_values(t) for t in read)
        computed = computes or any(self.holds_computed_values(t) for t in read)
        for value in [*_tensors(result), *_tensors(kwargs.get("out"))]:
            self._mark(value, triton, computed)

    def _mark(self, tensor: torch.Tensor, triton: bool, computed: bool) -> None:
        self.made_by_triton[_storage_key(tensor)] = triton
        self.computed_here[_storage_key(tensor)] = computed

    def holds_triton_values(self, tensor: torch.Tensor) -> bool:
        return self.made_by_triton.get(_storage_key(tensor), False)

    def holds_computed_values(self, tensor: torch.Tensor) -> bool:
        return self.computed_here.get(_storage_key(tensor), False)

    def after_launch(self, before: list[torch.Tensor], after: list[torch.Tensor]) -> None:
        """Update the Triton-value state of each tensor a launch wrote (`before`: clones taken just before it)."""
        for index, (old, new) in enumerate(zip(before, after)):
            if _bitwise_equal(old, new):
                continue  # not written
            copied_from = [other for other in range(len(before)) if _same_values(new, before[other])]
            if copied_from:
                # a copy (or a write within tolerance of the old values): the values keep their sources' state
                self._mark(new, any(self.holds_triton_values(after[other]) for other in copied_from),
                           any(self.holds_computed_values(after[other]) for other in copied_from))
            else:
                computed = not _constant(new)
                self._mark(new, computed, computed)

    def broken_guards(self) -> list[str]:
        return [buffer.description for buffer in self.buffers if not buffer.intact()]


def _storage_key(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage().data_ptr()


def _tensors(value: Any) -> Iterator[torch.Tensor]:
    flat, _ = tree_flatten(value)
    return (item for item in flat if isinstance(item, torch.Tensor))


def _bitwise_equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Whether a tensor holds the same bytes as its clone taken before a launch (a launch changes neither shape nor
    dtype)."""
    return bool(torch.equal(a.reshape(-1).contiguous().view(torch.uint8), b.reshape(-1).contiguous().view(torch.uint8)))


def _same_values(written: torch.Tensor, source: torch.Tensor) -> bool:
    """Whether `written` holds `source`'s values, in the same order or permuted (a copy, transpose or reshape),
    within the dtype's tolerance."""
    if written.numel() != source.numel():  # `written` changed, so it is not empty; no launch takes a complex tensor
        return False
    tolerance = tolerance_for(written.dtype)
    new = written.detach().reshape(-1).to(torch.float64)
    old = source.detach().reshape(-1).to(torch.float64)
    if bool(torch.isclose(new, old, equal_nan=True, **tolerance).all()):
        return True
    if not _same_extremes(new, old, tolerance):
        return False  # a permutation keeps the smallest and largest values: no need to sort
    return bool(torch.isclose(new.sort().values, old.sort().values, equal_nan=True, **tolerance).all())


def _same_extremes(new: torch.Tensor, old: torch.Tensor, tolerance: dict[str, float]) -> bool:
    """Whether two flat float64 tensors have the same NaN count and, within tolerance, the same minimum and maximum."""
    new_nan, old_nan = new.isnan(), old.isnan()
    if int(new_nan.sum()) != int(old_nan.sum()):
        return False
    new, old = new[~new_nan], old[~old_nan]  # not empty: tensors of NaN alone match in order, before this
    ends_new = torch.stack([new.min(), new.max()])
    ends_old = torch.stack([old.min(), old.max()])
    return bool(torch.isclose(ends_new, ends_old, **tolerance).all())


def takes_computing(expected: Any, arguments: list[Any]) -> bool:
    """Whether an expected output takes computing: anything but a tensor that is empty, a fill (every element the same)
    or, in some order, an input's values again (min(x, x), a reshape). For those, moving data is the computation."""
    if not isinstance(expected, torch.Tensor):
        return True  # a value returned outside tensors cannot be traced to where it was made
    if expected.numel() == 0:
        return False
    if expected.is_complex():
        return True
    expected = expected.detach().cpu()
    if _constant(expected):
        return False
    return not any(
        isinstance(argument, torch.Tensor) and not argument.is_complex() and _same_values(expected, argument.detach().cpu())
        for argument in arguments
    )


def _constant(tensor: torch.Tensor) -> bool:
    """Every element the same: a fill, not a computation."""
    if tensor.numel() <= 1:
        return False
    flat = tensor.detach().reshape(-1)
    return bool((flat == flat[0]).all())


def guard_launch(audit: CandidateAudit | None) -> Callable[[list], Callable[[list], None]] | None:
    """For the launch counter: a function taking a launch's tensor arguments before it runs, returning the function
    to call with them after it ran (None when no Triton-value tracking is asked for)."""
    if audit is None or not audit.track_triton_values:
        return None

    def before(tensors: list[torch.Tensor]):
        with audit.pause():
            snapshot = [tensor.clone() for tensor in tensors]

        def after(done: list[torch.Tensor]) -> None:
            with audit.pause():
                audit.after_launch(snapshot, done)

        return after

    return before
