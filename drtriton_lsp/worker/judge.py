"""The worker's `verify` method: the judge, which draws inputs, runs the reference, and decides from data alone.

The candidate runs in its own clean process (worker.candidate_host) that never sees the task, the reference, the
seeds or the tolerances; this process never imports candidate code. Checks, each with a named rejection: results match
the reference in several trials with fresh inputs, on inputs mutated in place in the same buffers, on non-contiguous
inputs, at odd sizes, for other instances and other calls, and (CPU) at the task's full size; no later call changes an
earlier output; Triton kernels launch, matter (the no-op test) and compute (the ATen audit); inputs stay unchanged;
no write lands outside a buffer; every call ends within a limit set by the reference's own time.
"""

from __future__ import annotations

import contextlib
import copy
import inspect
import math
import os
import shutil
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import torch

from drtriton_lsp.source.dispatch import declares_replay
from drtriton_lsp.task import Task
from drtriton_lsp.worker.candidate_process import CandidateProcess, Rejected, processes_for_device
from drtriton_lsp.worker.candidate_process import take as take_candidate_process
from drtriton_lsp.worker.capture import export_program, graph_from_exported
from drtriton_lsp.worker.gpu_lock import gpu_hold
from drtriton_lsp.worker.op_audit import OpRecorder, takes_computing
from drtriton_lsp.worker.shapes import InputShapePlan, plan_input_shapes, resize_inputs
from drtriton_lsp.worker.task_runtime import (
    build_model,
    draw_inputs,
    load_task,
    precision_settings,
    scratch_directory,
    task_file,
)
from drtriton_lsp.worker.tensor_exchange import flat_values, same_layout_on, share
from drtriton_lsp.worker.tolerances import tolerance_for


def init_seed(seed: int) -> int:
    """The seed both the reference and ModelNew are built under: large and varied, like a user's process's, so a
    candidate cannot tell a verification from its seed."""
    return (seed + 1) * 0x9E3779B97F4A7C15 % (1 << 62)

# A call's time limit: this floor, or this multiple of the reference's own time on the same inputs, whichever is
# larger; time spent compiling Triton kernels is not counted (the candidate's process announces it).
TRIAL_LIMIT_FLOOR_S = {"cuda": 20.0, "cpu": 30.0}
REFERENCE_TIME_FACTOR = 50.0
LOAD_LIMIT_S = 30.0  # importing the candidate and building ModelNew
# Under the CPU interpreter, the trial at the task's own sizes runs when it is estimated to take at most this long.
FULL_SIZE_BUDGET_S = 30.0
# Where a verification's time goes (`seconds` in its result), in the order of the checks.
PHASES = ("reference", "candidate load", "primary trials", "strided trial", "replay trials", "autograd trial",
          "odd sizes", "other calls and instances", "no-op trial", "full size")
# Trial labels (by their start) in the order of the checks, for the report's list of trials.
TRIAL_ORDER = ("primary", "strided", "replay", "autograd", "odd", "call", "instance", "full size")
# The seed offset of the draw that the checks after the primary trials share.
EXTRA_DRAW = 1500
# Calls of the replay trials (a dispatch that replays CUDA graphs): the first captures, the others replay.
REPLAY_CALLS = 3


class ReferenceFailed(Exception):
    """The task's own Model raised on these inputs: they are not inputs the task accepts."""


@dataclass
class Tally:
    """What the trials measured so far."""

    trials: int = 0
    passed: int = 0
    max_abs_err: float = 0.0
    max_rel_err: float = 0.0
    tolerance: dict[str, dict[str, float]] = field(default_factory=dict)
    shapes: list[dict[str, Any]] = field(default_factory=list)
    launches: int = 0
    kernels: dict[str, int] = field(default_factory=dict)
    # the candidate's schedule computes float32 matmuls in TF32: its float32 tolerance is looser
    tf32: bool = False
    # kernels run under Triton's CPU interpreter, whose bfloat16 rounding differs from GPUs'
    interpreter: bool = False
    # outputs accepted because they are no less accurate than eager against float64 (one line each)
    arbitrated: list[str] = field(default_factory=list)
    # the slowest candidate call so far and the input elements it had (to estimate a full-size trial)
    slowest_call_s: float = 0.0
    slowest_call_elements: int = 1

    def merge(self, other: Tally) -> None:
        """Add what another process's trials measured."""
        self.trials += other.trials
        self.passed += other.passed
        self.max_abs_err = max(self.max_abs_err, other.max_abs_err)
        self.max_rel_err = max(self.max_rel_err, other.max_rel_err)
        self.tolerance.update(other.tolerance)
        self.shapes.extend(other.shapes)
        self.launches += other.launches
        for name, count in other.kernels.items():
            self.kernels[name] = self.kernels.get(name, 0) + count
        self.arbitrated.extend(other.arbitrated)


@dataclass
class Call:
    """How a trial calls the forward: positional arguments and keyword arguments (tensors drawn, or scalars)."""

    args: list[Any]
    kwargs: dict[str, Any] = field(default_factory=dict)

    def with_layout(self, layout: Callable[[torch.Tensor], torch.Tensor]) -> Call:
        return Call([layout(v) if isinstance(v, torch.Tensor) else v for v in self.args],
                    {k: layout(v) if isinstance(v, torch.Tensor) else v for k, v in self.kwargs.items()})

    def elements(self) -> int:
        return sum(v.numel() for v in [*self.args, *self.kwargs.values()] if isinstance(v, torch.Tensor)) or 1


class DrawsAhead:
    """The judge's `get_inputs()` draws, each under its own seed: the next one known to be needed is made in a thread
    while the judge waits for the candidate's process (on a CPU, a full-size draw is a large part of a trial's time).

    A draw seeds torch's global generator, so the thread runs only inside `while_waiting`, where the judge's own
    thread draws nothing; a draw is the same values whichever thread makes it. A draw that failed in the thread is
    made again by `take`, whose caller then sees the task's error where it would have without the thread.
    """

    def __init__(self, draw: Callable[[int], list[Any]], planned: list[int]):
        self._draw = draw
        self._planned = list(planned)
        self._made: dict[int, list[Any]] = {}

    def take(self, offset: int) -> list[Any]:
        if offset in self._made:
            return self._made.pop(offset)
        if offset in self._planned:
            self._planned.remove(offset)
        return self._draw(offset)

    @contextlib.contextmanager
    def while_waiting(self, count: int = 1):
        """Make the next `count` planned draws in a thread while the block runs (the block must not use torch's RNG
        outside the judge's rng_lock)."""
        offsets, self._planned = self._planned[:count], self._planned[count:]
        if not offsets:
            yield
            return
        made: dict[int, list[Any]] = {}

        def draw() -> None:
            for offset in offsets:
                try:
                    made[offset] = self._draw(offset)
                except Exception:  # noqa: BLE001 - `take` draws again and raises in the judge's thread
                    pass

        thread = threading.Thread(target=draw, name=f"draws {offsets}", daemon=True)
        thread.start()
        try:
            yield
        finally:
            thread.join()
            self._made.update(made)


def run_verification(params: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """Verify on the device named in params; on a GPU, side by side with other verifications, never during a timing."""
    if torch.device(params["device"]).type != "cuda":
        return Judge(params, progress).run()
    with gpu_hold(exclusive=False):
        return Judge(params, progress).run()


@dataclass
class Lane:
    """One candidate process and what the judge remembers of the calls made to it."""

    host: CandidateProcess
    tally: Tally
    # numbers this lane's calls (each call's poison seed differs)
    first_call: int = 0
    calls: int = 0
    # the expected outputs of the last call that passed: a later output equal to them is a stale result
    previous_expected: list | None = None
    # the outputs of the call made with keep=True, as they came back (a later call must not change them)
    kept_outputs: list = field(default_factory=list)
    # CUDA graphs the written-back dispatch replayed in the replay trials
    graph_replays: int = 0

    @property
    def exchange(self) -> Path:
        return self.host.exchange


class SideChecks:
    """The size checks and the no-op test, run in a second candidate process at the same time as the primary trials
    (Judge)."""

    def __init__(self, judge: Judge, lane: Lane):
        self.judge = judge
        self.lane = lane
        self._extra: list[Any] = []
        self._example: list[Any] = []
        self._go = threading.Event()
        self._abandoned = False
        self._failure: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="side checks", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def go(self, extra: list[Any], example: list[Any]) -> None:
        """Start the checks on these draws (the shape plan is known by now)."""
        self._extra, self._example = extra, example
        self._go.set()

    def _run(self) -> None:
        try:
            self.judge._finish_load(self.lane)
            self._go.wait()
            if not self._abandoned:
                self.judge._size_checks(self.lane, self._extra, self._example)
        except BaseException as failure:  # noqa: BLE001 - handed to the judge's thread by finish()
            self._failure = failure

    def abandon(self) -> None:
        """The primary trials decided already: stop the other process, whose outcome no longer matters."""
        self._abandoned = True
        self._go.set()
        self.judge.timed.set()  # nothing the checks wait for is coming
        self.lane.host.kill()
        self._thread.join()

    def finish(self) -> None:
        """Wait for the checks; raise what they raised (a rejection, or the task's own error)."""
        self._thread.join()
        if self._failure is not None:
            raise self._failure


class Judge:
    """One verification: the task's reference here, the candidate in CandidateProcesses.

    The primary trials run in one candidate process, followed there by every other checked call at the primary sizes
    (autograd, other calls and instances, strided inputs), so a result that goes stale after some number of calls
    meets as many checks as in a single process. On the CPU, where each call is a core's worth of Triton's
    interpreter, the odd-size, no-op and full-size checks run at the same time in a second process of the same
    candidate, each process clean and unaware of the other. A rejection from the first process is reported first.
    """

    def __init__(self, params: dict[str, Any], progress: Callable[[str], None]):
        self.params = params
        self._progress = progress
        self._progress_lock = threading.Lock()
        self.task = Task.from_json(params["task"])
        self.device = torch.device(params["device"])
        self.trials = int(params.get("trials", 5))
        # every random draw (weights, inputs) is seeded from this base: another base is another set of trials
        self.seed = int(params.get("seed", 0))
        self.directory = scratch_directory()
        interpreter = os.environ.get("TRITON_INTERPRET") == "1"
        self.tally = Tally(tf32=bool(params.get("tf32", False)), interpreter=interpreter)
        self.checks: dict[str, Any] = {
            "isolation": "the candidate ran in its own process; the judge drew inputs and compared outputs",
            "poisoned_outputs": True,
        }
        self.audit: dict[str, Any] = {}
        # wall seconds by phase (loading, each kind of trial), for the report
        self.seconds: dict[str, float] = {}
        self.floor_s = TRIAL_LIMIT_FLOOR_S["cuda" if self.device.type == "cuda" else "cpu"]
        self.lanes: list[Lane] = []
        # set once a call's time is known (the full-size trial's estimate needs one)
        self.timed = threading.Event()
        self.ipc = False
        # torch's global generator: a draw and a seeded construction never interleave across threads
        self.rng_lock = threading.Lock()
        # the primary trials' draws and the remaining checks' draw, each made while the candidate's process loads or
        # computes
        self.draws = DrawsAhead(self._draw_now, [1000, EXTRA_DRAW] + [1000 + trial for trial in range(1, self.trials)])
        self._float64_models: dict[torch.nn.Module, torch.nn.Module | None] = {}
        self._cpu_models: dict[torch.nn.Module, torch.nn.Module] = {}

    def progress(self, message: str) -> None:
        with self._progress_lock:
            self._progress(message)

    def run(self) -> dict[str, Any]:
        # started ahead, or now: their imports run while the reference is built
        for number in range(processes_for_device(self.device.type)):
            tally = self.tally if number == 0 else Tally(tf32=self.tally.tf32, interpreter=self.tally.interpreter)
            self.lanes.append(Lane(take_candidate_process(), tally, first_call=1000 * number))
        for lane in self.lanes:
            (lane.exchange / "candidate.py").write_text(self.params["candidate"])
        if len(self.lanes) > 1:
            self.checks["isolation"] = (
                "the candidate ran in two processes of its own (every call at the primary sizes in one; the odd-size, "
                "no-op and full-size checks at the same time in the other); the judge drew inputs and compared outputs"
            )
        result: dict[str, Any] = {"interpreter": self.tally.interpreter, "checks": self.checks}
        try:
            self._judge()
            result.update(verified=True, reason=None, detail="")
        except Rejected as rejection:
            result.update(verified=False, reason=rejection.reason, detail=rejection.detail)
        finally:
            for lane in self.lanes:
                lane.host.close()
        for lane in self.lanes[1:]:
            self.tally.merge(lane.tally)
        # in the checks' order, whichever process ran them (stable: trials of one kind keep their order)
        self.tally.shapes.sort(key=lambda shape: _check_rank(shape["label"]))
        self.checks["triton_launches"] = self.tally.launches
        self.checks["kernels_launched"] = self.tally.kernels
        if self.tally.arbitrated:
            self.checks["float64_arbiter"] = self.tally.arbitrated
        result.update(
            trials=self.tally.trials,
            passed=self.tally.passed,
            max_abs_err=self.tally.max_abs_err,
            max_rel_err=self.tally.max_rel_err,
            tolerance=self.tally.tolerance,
            shapes=self.tally.shapes,
            kept_ops=self.audit.get("kept_ops"),
            replaced_ops=self.audit.get("replaced_ops"),
            # in the checks' order (the side process's phases end in any order)
            seconds={phase: self.seconds[phase] for phase in PHASES if phase in self.seconds},
        )
        return result

    # the checks, in order

    def _judge(self) -> None:
        self.progress("loading the task, and the candidate in its own process")
        with self._timed("reference"):
            self.task_module = load_task(self.task, self.directory)
            self.init_inputs = self.task_module.get_init_inputs() if hasattr(self.task_module, "get_init_inputs") else []
            self._save_for_all(["init.pt"], [list(self.init_inputs)])
        # each candidate process imports the candidate and builds ModelNew while the reference is built here
        self.ipc_probe = torch.arange(4, device=self.device) if self.device.type == "cuda" else None
        for lane in self.lanes:
            self._start_load(lane)
        with self._timed("reference"):
            self.reference = build_model(self.task, self.task_module, self.directory, init_seed(self.seed)).to(self.device)
            self._save_for_all(["state.pt"], [_cpu_state(self.reference)])
        main = self.lanes[0]
        side = SideChecks(self, self.lanes[1]) if len(self.lanes) > 1 else None
        if side is not None:
            side.start()  # it takes its process's load answer and gives it the weights while the main one does
        try:
            with self._timed("candidate load"), self.draws.while_waiting(count=2):
                self._finish_load(main)
            with self._timed("primary trials"):
                example = self.draws.take(1000)
                self.plan = self._shape_plan(example, reduced=self.device.type == "cpu")
                self.checks["odd_shapes"] = self.plan.odd_reason or "tried"
                # one more draw serves the remaining checks: each asks a different question of the same values
                # (drawing is most of a small trial's time on the CPU: get_inputs() draws at the task's full size)
                extra = self.draws.take(EXTRA_DRAW)
                # the sizes every check shares are settled before the second process starts on them
                first = self._primary_inputs(example)
                if side is not None:
                    side.go(extra, example)
                self._primary_trials(main, first)
            self._checks_after_primary(main, extra)
            if side is None:
                self._size_checks(main, extra, example)
        except BaseException:
            if side is not None:
                side.abandon()
            raise
        if side is not None:
            side.finish()
        self.checks["kernels_have_effect"] = True
        self.checks["reference_not_reachable"] = True
        self.checks["inputs_unchanged"] = True
        self.checks["guard_regions"] = "no write outside any buffer the candidate was given or allocated"

    def _start_load(self, lane: Lane) -> None:
        """Have the lane's process import the candidate and build its ModelNew (answered in `_finish_load`)."""
        lane.host.send(
            "load",
            {"source": "candidate.py", "init": "init.pt", "init_seed": init_seed(self.seed),
             "device": str(self.device), "precision": precision_settings(),
             "ipc_probe": share(self.ipc_probe) if self.ipc_probe is not None else None},
        )

    def _finish_load(self, lane: Lane) -> None:
        """The load's answer, then the reference's weights (state.pt, saved by now) loaded into ModelNew."""
        # the candidate's allowance counts from now: the judge built the reference since the load was sent
        waited_s = time.monotonic() - lane.host.sent_at
        loaded = lane.host.answer(LOAD_LIMIT_S + waited_s, "importing the candidate and building ModelNew")
        weights = lane.host.request("weights", {"name": "primary", "state": "state.pt"}, LOAD_LIMIT_S,
                                    "loading the reference's weights into ModelNew")
        if lane is not self.lanes[0]:
            return
        self.checks["weights"] = str(weights.get("weights", ""))[:200]
        # tensors cross in shared GPU memory when the candidate's process could read the probe, else in files
        self.ipc = self.ipc_probe is not None and loaded.get("ipc_probe_sum") == 6
        self.checks["tensor_exchange"] = "shared GPU memory (CUDA IPC)" if self.ipc else "files"

    def _checks_after_primary(self, lane: Lane, extra: list[Any]) -> None:
        """The checked calls at the primary sizes after the primary trials, in their process, on the values of one
        draw (each check shifts them by another amount, so no two calls see the same values)."""
        # autograd on, as in a user's default mode, and the arguments passed by keyword where the forward allows it:
        # the same results are due (from the kernels, or from the written dispatch's fallback to PyTorch where
        # gradients are needed)
        with self._timed("autograd trial"):
            inputs = resize_inputs(_shifted(extra, 2), self.plan.primary)
            keywords = _keyword_call(self.task_module.Model.forward, inputs)
            label = "autograd on, keyword arguments" if keywords else "autograd on"
            self.progress(f"trial with {label}")
            self._trial(lane, keywords or Call(inputs), label, autograd=True, must_launch=False,
                        mismatch="wrong_for_other_call", overlap_reference=True)
        self.checks["autograd_on"] = "tried once" + (", with keyword arguments" if keywords else "")
        with self._timed("other calls and instances"):
            self._variants(lane, _shifted(extra, 4))
        with self._timed("strided trial"):
            self._strided_trial(lane, _shifted(extra, 1))
        with self._timed("replay trials"):
            self._replay_trials(lane, _shifted(extra, 6))

    def _size_checks(self, lane: Lane, extra: list[Any], example: list[Any]) -> None:
        """Odd sizes, the no-op test and (CPU) the task's own sizes: on the CPU, in the second process (none is a
        checked call at the primary sizes: the no-op call checks nothing a stale result could fail)."""
        with self._timed("odd sizes"):
            self._odd_trials(lane, _shifted(extra, 3))
        with self._timed("no-op trial"):
            self._no_op_trial(lane, _shifted(extra, 5))
        with self._timed("full size"):
            self._full_size_trial(lane, example)

    @contextlib.contextmanager
    def _timed(self, phase: str):
        """Adds the block's wall time to `seconds[phase]` (where the verification's time went, in the report)."""
        started = time.monotonic()
        try:
            yield
        finally:
            self.seconds[phase] = round(self.seconds.get(phase, 0.0) + time.monotonic() - started, 3)

    def _primary_trials(self, lane: Lane, first: list[Any]) -> None:
        """`first`: the first trial's inputs, at the sizes the reference accepts (see _primary_inputs)."""
        for trial in range(self.trials):
            self.progress(f"trial {trial + 1}/{self.trials} at {self.plan.describe('primary')}")
            inputs = first if trial == 0 else resize_inputs(self.draws.take(1000 + trial), self.plan.primary)
            if trial == 0:
                try:
                    self._trial(lane, Call(inputs), "primary", audit=True, keep=True)
                except ReferenceFailed as failure:  # at the sizes get_inputs draws: the task itself is broken
                    raise Rejected("reference_failed", str(failure)) from failure
            elif trial == 1:
                # the first call's buffers, refilled in place with its values changed in the interior only: a
                # result cached by address or by a few values goes stale; and the first call's output must still
                # hold its values (no buffer shared across calls)
                self._trial(lane, Call(_interior_changed(first, inputs)), "primary", reuse_buffers=True,
                            recheck=lane.previous_expected, overlap_reference=True)
                self.checks["state_across_calls"] = (
                    "checked: inputs refilled in place with new interior values, the earlier output read again, "
                    "every call's values distinct"
                )
            else:
                self._trial(lane, Call(inputs), "primary", overlap_reference=True)

    def _primary_inputs(self, drawn: list[Any]) -> list[Any]:
        """The first draw at the planned sizes; at the drawn sizes (and the plan changed) where the reference
        cannot run at the planned ones."""
        inputs = resize_inputs(drawn, self.plan.primary)
        if self.plan.primary == [_shape_of(value) for value in drawn]:
            return inputs  # the sizes get_inputs draws: the trial itself says if the reference rejects them
        try:
            self._reference_outputs(Call(inputs))
            return inputs
        except ReferenceFailed as failure:
            if self.plan.primary == [_shape_of(value) for value in drawn]:
                raise Rejected("reference_failed", str(failure)) from failure
            # the task fixes sizes the reduced plan changed: run at the sizes get_inputs draws
            self.checks["reduced_shapes"] = f"not used: the reference cannot run at them ({failure})"
            self.plan.primary = [_shape_of(value) for value in drawn]
            return drawn

    def _strided_trial(self, lane: Lane, drawn: list[Any]) -> None:
        inputs = resize_inputs(drawn, self.plan.primary)
        strided = Call(inputs).with_layout(_non_contiguous)
        if all(isinstance(v, torch.Tensor) and v.is_contiguous() or not isinstance(v, torch.Tensor) for v in strided.args):
            self.checks["strided_inputs"] = "not tried: no input can be laid out another way"
            return
        self.progress("trial with non-contiguous inputs")
        try:
            self._trial(lane, strided, "strided", mismatch="wrong_for_strided_inputs")
        except ReferenceFailed as failure:
            self.checks["strided_inputs"] = f"not tried: the reference rejects non-contiguous inputs ({failure})"
            return
        self.checks["strided_inputs"] = "tried (transposed or strided views of the inputs)"

    def _replay_trials(self, lane: Lane, drawn: list[Any]) -> None:
        """A written-back dispatch that replays CUDA graphs (`replay=True`) is off in every other trial (they count
        and audit launches, which a replay does not make); here it is on, for REPLAY_CALLS calls on other values
        each: the first captures a graph, the later ones replay it, and the first call's outputs must still hold
        their values after the second (a replay's outputs are copies, never its own buffers)."""
        if self.device.type != "cuda":
            self.checks["graph_replay"] = "not tried: CUDA graphs need a GPU"
            return
        if not declares_replay(self.params["candidate"]):
            self.checks["graph_replay"] = "not tried: the dispatch does not replay CUDA graphs"
            return
        earlier: list | None = None
        for number in range(REPLAY_CALLS):
            self.progress(f"trial with CUDA-graph replay {number + 1}/{REPLAY_CALLS}")
            inputs = resize_inputs(_shifted(drawn, number), self.plan.primary)
            expected = self._trial(
                lane, Call(inputs), "replay" if number == 0 else "replay (replayed)", mismatch="wrong_under_replay",
                must_launch=False, replay=True, keep=number == 0, recheck=earlier if number == 1 else None,
            )  # fmt: skip
            earlier = expected
        replayed = lane.graph_replays
        self.checks["graph_replay"] = (
            f"tried: {REPLAY_CALLS} calls with the dispatch's CUDA-graph replay on, other values each, the first "
            f"call's outputs read again after the second; {replayed} graph replays"
            + ("" if replayed else " (the dispatch ran the forward plainly: it did not capture a graph of it)")
        )

    def _odd_trials(self, lane: Lane, drawn: list[Any]) -> None:
        skipped: list[str] = []
        for index, sizes in enumerate(self.plan.odd):
            where = self.plan.describe("odd", index)
            self.progress(f"odd-size trial {index + 1}/{len(self.plan.odd)} at {where}")
            inputs = resize_inputs(drawn, sizes)
            # resized index inputs (class targets, positions) may point past a resized dim
            failure = self._rejected_on_the_cpu(Call(inputs))
            if failure:
                skipped.append(f"{where} ({failure})")
                continue
            try:
                self._trial(lane, Call(inputs), "odd", mismatch="wrong_at_odd_shape")
            except ReferenceFailed as failure:
                skipped.append(f"{where} ({failure})")
        if skipped:
            self.checks["odd_shapes"] = "skipped where the reference itself cannot run: " + "; ".join(skipped)

    def _variants(self, lane: Lane, drawn: list[Any]) -> None:
        """Other instances (other scalar constructor values) and other calls (keywords, defaults, other scalars):
        the candidate may run its kernels or fall back to PyTorch there, but its results must match."""
        notes: list[str] = []
        inputs = resize_inputs(drawn, self.plan.primary)
        for label, call in _call_variants(self.task_module.Model.forward, inputs):
            # another scalar (an ignore_index) may let an index input's out-of-range values through
            failure = self._rejected_on_the_cpu(call)
            if failure:
                notes.append(f"call {label}: skipped, the reference rejects it ({failure})")
                continue
            self.progress(f"trial with another call: {label}")
            try:
                self._trial(lane, call, f"call: {label}", mismatch="wrong_for_other_call", must_launch=False)
                notes.append(f"call {label}: matched")
            except ReferenceFailed as failure:
                notes.append(f"call {label}: skipped, the reference rejects it ({failure})")
        for number, (label, init) in enumerate(_init_variants(self.init_inputs), start=1):
            name = f"variant{number}"
            try:
                with self.rng_lock:
                    torch.manual_seed(init_seed(self.seed))
                    reference = self.task_module.Model(*init).eval().to(self.device)
                # another constructor value (a pad_id) may let an index input's out-of-range values through
                failure = self._rejected_on_the_cpu(Call(inputs), reference)
                if not failure:
                    self._reference_outputs(Call(inputs), reference)
            except Exception as error:  # noqa: BLE001 - the task does not accept these values: nothing to compare
                failure = str(error) if isinstance(error, ReferenceFailed) else f"{type(error).__name__}: {error}"[:200]
            if failure:
                notes.append(f"instance {label}: skipped, the reference rejects it ({failure})")
                continue
            self.progress(f"trial with another instance: {label}")
            self._save(lane, f"{name}-init.pt", list(init))
            self._save(lane, f"{name}-state.pt", _cpu_state(reference))
            lane.host.request(
                "instance",
                {"name": name, "init": f"{name}-init.pt", "state": f"{name}-state.pt", "init_seed": init_seed(self.seed)},
                LOAD_LIMIT_S, f"building ModelNew({label})",
            )
            self._trial(lane, Call(inputs), f"instance: {label}", mismatch="wrong_for_other_instance", must_launch=False,
                        instance=name, reference=reference)
            notes.append(f"instance {label}: matched")
        self.checks["other_instances_and_calls"] = notes or ["none: no scalar constructor value or call argument to vary"]

    def _full_size_trial(self, lane: Lane, example: list[Any]) -> None:
        full = [_shape_of(value) for value in example]
        if self.device.type == "cuda":
            self.checks["full_size"] = "every trial at the task's own sizes"
            return
        if self.plan.primary == full:
            self.checks["full_size"] = "the primary trials ran at the task's own sizes"
            return
        call = Call(self._draw_now(3500))
        estimate = self._seconds_per_element() * call.elements()
        if estimate > FULL_SIZE_BUDGET_S:
            self.checks["full_size"] = (
                f"not tried: about {estimate:.0f} s under the interpreter, over the {FULL_SIZE_BUDGET_S:.0f} s budget; "
                "trials ran at reduced sizes only"
            )
            return
        self.progress("trial at the task's own sizes")
        try:
            self._trial(lane, call, "full size", mismatch="wrong_at_full_size", limit_s=3 * estimate + self.floor_s)
        except ReferenceFailed as failure:
            self.checks["full_size"] = f"not tried: the reference failed ({failure})"
            return
        self.checks["full_size"] = "tried once at the task's own sizes"

    def _seconds_per_element(self) -> float:
        """The candidate's slowest call so far, per input element, over every process (waiting for a first call)."""
        self.timed.wait()
        return max(lane.tally.slowest_call_s / lane.tally.slowest_call_elements for lane in self.lanes)

    def _no_op_trial(self, lane: Lane, drawn: list[Any]) -> None:
        """DRTriton's no-op test: with every Triton launch skipped, the output must no longer match."""
        self.progress("checking that the Triton kernels matter")
        inputs = resize_inputs(drawn, self.plan.primary)
        try:
            self._trial(lane, Call(inputs), "no-op", skip_launches=True,
                        tally=Tally(interpreter=self.tally.interpreter, tf32=self.tally.tf32))
        except Rejected:
            return
        raise Rejected(
            "kernels_have_no_effect",
            "the output is still correct with every Triton launch skipped: the result comes from elsewhere",
        )

    # one call

    def _trial(
        self,
        lane: Lane,
        call: Call,
        label: str,
        *,
        mismatch: str = "wrong_result",
        audit: bool = False,
        keep: bool = False,
        reuse_buffers: bool = False,
        recheck: list | None = None,
        skip_launches: bool = False,
        autograd: bool = False,
        replay: bool = False,
        must_launch: bool = True,
        instance: str = "primary",
        reference: torch.nn.Module | None = None,
        tally: Tally | None = None,
        limit_s: float | None = None,
        overlap_reference: bool = False,
    ) -> list:
        """Run the reference and the candidate on `call`; raise Rejected unless they agree. Returns the expected outputs.

        overlap_reference: the reference runs while the candidate's process computes, for calls at sizes the
        reference has already run at; the reference failing there is the task's own failure (reference_failed)."""
        reference = reference or self.reference
        counting = tally is None
        tally = tally or lane.tally
        recorder = OpRecorder() if audit else None
        lane.calls += 1
        request = {
            "instance": instance, "audit": audit, "keep": keep, "reuse_buffers": reuse_buffers,
            "recheck": recheck is not None, "skip_launches": skip_launches, "autograd": autograd, "replay": replay,
            "poison_seed": self.seed * 7919 + lane.first_call + lane.calls,
        }
        doing = f"{label} trial"
        if overlap_reference and not self.ipc:
            # files carry the tensors: the candidate's process computes while the reference runs here
            shared = self._send_tensors(lane, call, [], recheck, request)
            lane.host.send("call", request)
            try:
                expected, reference_s, aliases = self._reference_outputs(call, reference, recorder)
            except ReferenceFailed as failure:  # the call in flight is never read: the verification ends here
                raise Rejected("reference_failed", f"{label}: {failure}") from failure
        else:
            expected, reference_s, aliases = self._reference_outputs(call, reference, recorder)
            # held here until the answer arrives: on a GPU the candidate's process reads and writes this memory
            shared = self._send_tensors(lane, call, expected, recheck, request)
            lane.host.send("call", request)
        limit = limit_s or max(self.floor_s, REFERENCE_TIME_FACTOR * reference_s)
        # the main lane's next draw is made meanwhile (the other lane's calls never draw)
        ahead = self.draws.while_waiting() if lane is self.lanes[0] else contextlib.nullcontext()
        with ahead:
            answer = _checked_call_answer(lane.host.answer(limit, doing))
        if counting:
            tally.launches += answer["launches"]
            for name, count in answer["kernels"].items():
                tally.kernels[name] = tally.kernels.get(name, 0) + count
            arguments = [*call.args, *call.kwargs.values()]
            tally.shapes.append({"label": label, "inputs": [list(v.shape) for v in arguments if isinstance(v, torch.Tensor)]})
            tally.trials += 1
            if answer["seconds"] > tally.slowest_call_s:
                tally.slowest_call_s, tally.slowest_call_elements = answer["seconds"], call.elements()
            self.timed.set()
        lane.graph_replays += answer["graph_replays"]
        if answer["broken_guards"]:
            raise Rejected("out_of_bounds_write", f"{label}: a kernel wrote outside " + "; ".join(answer["broken_guards"][:5]))
        if answer["modified_inputs"]:
            raise Rejected("modified_inputs", f"{label}: input {answer['modified_inputs'][0]} was changed by the candidate")
        actual = self._received_outputs(lane, answer["outputs"], expected, shared, "outputs")
        try:
            _compare(expected, actual, tally, label, lambda: _float64_outputs(self._widened(reference), call, self.device))
        except Rejected as rejection:
            if lane.previous_expected is not None and _matches(lane.previous_expected, actual):
                raise Rejected("state_across_calls", f"{label}: the output is the previous call's result") from None
            raise Rejected(mismatch if rejection.reason == "wrong_result" else rejection.reason, rejection.detail) from None
        if recheck is not None:
            # the earlier call's outputs, read again now, must hold exactly what they held when it returned; an
            # output that is a view of an input (as the reference's is) changes with the refilled input: skipped
            again = self._received_outputs(lane, None, recheck, shared, "recheck")
            for index, (before, now, alias) in enumerate(zip(lane.kept_outputs, again, aliases)):
                if not alias and not _identical(before, now):
                    raise Rejected("state_across_calls", f"{label}: a later call changed output {index} of an earlier call")
        if keep:
            lane.kept_outputs = [value.clone() if isinstance(value, torch.Tensor) else value for value in actual]
        # after the comparison, so a stale result returned without a launch is named for what it is
        if must_launch and not skip_launches and answer["launches"] == 0:
            raise Rejected("no_triton_launch", f"{label}: the candidate's forward launched no Triton kernel")
        if audit:
            self._judge_audit(recorder.compute_ops, answer, expected, [*call.args, *call.kwargs.values()])
        if counting:
            tally.passed += 1
            lane.previous_expected = expected
        return expected

    def _judge_audit(self, reference_ops: Counter, answer: dict[str, Any], expected: list, arguments: list) -> None:
        """Whether the Triton kernels computed the replaced ops, from what ran (never from the candidate's claim).
        `expected`: the reference's outputs; `arguments`: the call's inputs."""
        kept = Counter(answer["torch_ops"])
        replaced = reference_ops - kept
        self.audit["kept_ops"] = sorted(kept.elements())
        self.audit["replaced_ops"] = sorted(replaced.elements())
        self.checks["aten_audit"] = {
            "pytorch_ops_run_by_candidate": dict(kept),
            "reference_ops": dict(reference_ops),
        }
        # an output that takes computing (not an input's values again, not a fill) but holds values neither Triton nor
        # PyTorch computed in the forward was computed elsewhere (plain Python, numpy) and moved in
        outside = [
            index for index, (value, here) in enumerate(zip(expected, answer["outputs_computed_here"]))
            if not here and takes_computing(value, arguments)
        ]
        if reference_ops and outside:
            raise Rejected(
                "reference_in_pytorch",
                f"output {outside[0]} holds values computed outside PyTorch and Triton (on the host) and moved in",
            )
        # wherever the maths ran instead (PyTorch, numpy, plain Python on the host), no output holds Triton's values;
        # unless no output takes computing (min(x, x), x - x): then a kernel that moves data is a correct one
        if (kept or reference_ops) and not any(answer["outputs_hold_triton_values"]) and any(
            takes_computing(value, arguments) for value in expected
        ):
            where = f"in PyTorch ({', '.join(sorted(kept))})" if kept else "outside PyTorch and Triton (on the host)"
            raise Rejected(
                "reference_in_pytorch",
                f"no output holds values a Triton kernel computed; the maths ran {where} and the kernels only moved data",
            )
        if reference_ops and not replaced:
            raise Rejected(
                "reference_in_pytorch",
                f"every op of the reference ran in PyTorch ({', '.join(sorted(reference_ops))})",
            )

    # helpers

    def _reference_outputs(self, call: Call, reference: torch.nn.Module | None = None,
                           recorder: OpRecorder | None = None) -> tuple[list, float, list[bool]]:
        """The reference's outputs, its time, and which outputs are views of an input (share its memory)."""
        reference = reference or self.reference
        args, kwargs = _to_device(call, self.device)
        started = time.monotonic()
        try:
            with torch.no_grad():
                if recorder is not None:
                    with recorder:
                        outputs = reference(*args, **kwargs)
                else:
                    outputs = reference(*args, **kwargs)
            _synchronize(self.device)
        except Exception as error:  # noqa: BLE001 - the task rejects these inputs; the caller decides
            raise ReferenceFailed(f"{type(error).__name__}: {str(error)[:200]}") from error
        seconds = time.monotonic() - started
        flat = flat_values(outputs)
        inputs = {v.untyped_storage().data_ptr() for v in [*args, *kwargs.values()] if isinstance(v, torch.Tensor)}
        aliases = [isinstance(v, torch.Tensor) and v.untyped_storage().data_ptr() in inputs for v in flat]
        return flat, seconds, aliases

    def _send_tensors(self, lane: Lane, call: Call, expected: list, recheck: list | None, request: dict[str, Any]) -> dict:
        """Put the call's inputs where the candidate's process reads them, and say where its outputs go: shared GPU
        memory (buffers of the expected outputs' shapes) when CUDA IPC works, else files. Returns what must stay
        alive until the answer."""
        if not self.ipc:
            self._save(lane, "inputs.pt", {"args": call.args, "kwargs": call.kwargs})
            request.update(inputs="inputs.pt", outputs="outputs.pt", recheck_to="recheck.pt")
            return {}
        inputs = {"args": [same_layout_on(v, self.device) for v in call.args],
                  "kwargs": {k: same_layout_on(v, self.device) for k, v in call.kwargs.items()}}
        shared = {"inputs": inputs, "outputs": _receptacles(expected), "recheck": _receptacles(recheck or [])}
        request.update(inputs_shared=share(inputs), receptacles=share(shared["outputs"]),
                       recheck_receptacles=share(shared["recheck"]))
        return shared

    def _received_outputs(self, lane: Lane, described: list[dict[str, Any]] | None, expected: list, shared: dict,
                          which: str) -> list:
        """The outputs the candidate's process returned (or re-read, for `recheck`), as tensors on this device."""
        if not self.ipc:
            return self._load_outputs(lane.exchange / ("outputs.pt" if which == "outputs" else "recheck.pt"), described)
        receptacles = shared[which]
        if described is not None:
            if len(described) != len(expected):
                raise Rejected("wrong_result", f"{len(described)} outputs, expected {len(expected)}")
            for index, (output, receptacle) in enumerate(zip(described, receptacles)):
                if receptacle is None:
                    continue
                got = (output.get("shape"), output.get("dtype"))
                want = (list(receptacle.shape), str(receptacle.dtype).removeprefix("torch."))
                if output["kind"] != "tensor" or got != want:
                    raise Rejected("wrong_result", f"output {index} is {output}, expected a tensor of {want}")
        values = [output.get("value") for output in described] if described else [None] * len(receptacles)
        return [receptacle if receptacle is not None else value for receptacle, value in zip(receptacles, values)]

    def _load_outputs(self, path: Path, described: list[dict[str, Any]] | None) -> list:
        try:
            values = torch.load(path, weights_only=True)
        except Exception as error:  # noqa: BLE001 - anything unreadable is the candidate process's doing
            raise Rejected("protocol_violation", f"its outputs could not be read safely: {type(error).__name__}") from None
        if not isinstance(values, list) or (described is not None and len(values) != len(described)):
            raise Rejected("protocol_violation", "its outputs file does not match its answer")
        for value in values:
            if not (value is None or type(value) in (bool, int, float) or type(value) is torch.Tensor):
                raise Rejected("protocol_violation", f"an output of type {type(value).__name__}")
        return [value.to(self.device) if isinstance(value, torch.Tensor) else value for value in values]

    def _widened(self, reference: torch.nn.Module) -> torch.nn.Module | None:
        """A float64 copy of `reference`, made once per model (None when it cannot be widened)."""
        if reference not in self._float64_models:
            try:
                self._float64_models[reference] = copy.deepcopy(reference).double()
            except Exception:  # noqa: BLE001 - without a float64 reference, the dtype tolerance decides alone
                self._float64_models[reference] = None
        return self._float64_models[reference]

    def _rejected_on_the_cpu(self, call: Call, reference: torch.nn.Module | None = None) -> str:
        """Why the reference rejects `call`, asked of a CPU copy of it first, for a check that skips a call the
        reference rejects: where an index input out of range would fail a device assert that ruins this process
        (_index_errors_ruin_the_process). Empty where the reference accepts the call, or the device raises instead."""
        if not _index_errors_ruin_the_process(self.device) or not _has_index_inputs([*call.args, *call.kwargs.values()]):
            return ""
        reference = reference or self.reference
        if reference not in self._cpu_models:
            self._cpu_models[reference] = copy.deepcopy(reference).cpu()
        return _reference_failure(self._cpu_models[reference], call)

    def _draw_now(self, offset: int) -> list[Any]:
        with self.rng_lock:
            return draw_inputs(self.task, self.task_module, self.directory, seed=self.seed + offset)

    def _save(self, lane: Lane, name: str, value: Any) -> None:
        torch.save(value, lane.exchange / name)

    def _save_for_all(self, names: list[str], values: list[Any]) -> None:
        """Save each value once, in the first lane's folder, and link the file into the others'."""
        for name, value in zip(names, values):
            self._save(self.lanes[0], name, value)
            for lane in self.lanes[1:]:
                try:
                    os.link(self.lanes[0].exchange / name, lane.exchange / name)
                except OSError:  # another file system: a copy
                    shutil.copyfile(self.lanes[0].exchange / name, lane.exchange / name)

    def _shape_plan(self, example: list[Any], reduced: bool) -> InputShapePlan:
        symbolic = self.params.get("input_shapes")
        if symbolic is None:
            symbolic = _discover_symbolic_shapes(self.reference, _to_device(Call(example), self.device)[0], self.directory)
        return plan_input_shapes(example, symbolic, reduced=reduced)


def _check_rank(label: str) -> int:
    return next((rank for rank, start in enumerate(TRIAL_ORDER) if label.startswith(start)), len(TRIAL_ORDER))


def _receptacles(outputs: list) -> list[torch.Tensor | None]:
    """A buffer of each tensor output's shape and dtype (the candidate's process copies its outputs into them)."""
    return [torch.empty(v.shape, dtype=v.dtype, device=v.device) if isinstance(v, torch.Tensor) else None
            for v in outputs]


def _checked_call_answer(answer: dict[str, Any]) -> dict[str, Any]:
    """The candidate process's answer to a call, with every field of the expected type (else protocol_violation)."""
    expected_types = {
        "outputs": list, "launches": int, "kernels": dict, "torch_ops": dict, "outputs_hold_triton_values": list,
        "outputs_computed_here": list, "broken_guards": list, "modified_inputs": list, "seconds": (int, float),
        "graph_replays": int,
    }
    for key, kind in expected_types.items():
        if not isinstance(answer.get(key), kind) or isinstance(answer.get(key), bool):
            raise Rejected("protocol_violation", f"its answer's {key!r} is not a {getattr(kind, '__name__', 'number')}")
    if not all(isinstance(k, str) and type(v) is int for k, v in [*answer["kernels"].items(), *answer["torch_ops"].items()]):
        raise Rejected("protocol_violation", "its launch or op counts are not counts")
    for output in answer["outputs"]:
        if not isinstance(output, dict) or output.get("kind") not in ("tensor", "value", "unsupported"):
            raise Rejected("protocol_violation", "an output it described in an unknown way")
        if output["kind"] == "unsupported":
            raise Rejected("wrong_result", f"the forward returned {str(output.get('type'))[:100]}, not a plain tensor")
    if not all(type(flag) is bool for flag in [*answer["outputs_hold_triton_values"], *answer["outputs_computed_here"]]):
        raise Rejected("protocol_violation", "its audit flags are not booleans")
    if len(answer["outputs_computed_here"]) != len(answer["outputs"]):
        raise Rejected("protocol_violation", "its audit flags are not one per output")
    answer["broken_guards"] = [str(item)[:200] for item in answer["broken_guards"]]
    return answer


def _keyword_call(forward: Callable, inputs: list[Any]) -> Call | None:
    """The same call with every argument passed by keyword, where the forward's signature allows it."""
    try:
        parameters = list(inspect.signature(forward).parameters.values())[1:]
    except (TypeError, ValueError):
        return None
    if not inputs or any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY) for p in parameters):
        return None
    return Call([], dict(zip([p.name for p in parameters], inputs)))


def _call_variants(forward: Callable, inputs: list[Any]) -> list[tuple[str, Call]]:
    """Calls that exercise the written call path: defaults left out, other scalar arguments (keywords: see
    _keyword_call, used by the autograd trial)."""
    try:
        parameters = list(inspect.signature(forward).parameters.values())[1:]
    except (TypeError, ValueError):
        return []
    if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD, p.POSITIONAL_ONLY) for p in parameters):
        return []
    bound = dict(zip([p.name for p in parameters], inputs))
    variants: list[tuple[str, Call]] = []
    supplied_defaults = [p.name for p in parameters if p.name in bound and p.default is not p.empty]
    if supplied_defaults:
        required = [p.name for p in parameters if p.name in bound and p.default is p.empty]
        variants.append((f"defaults for {', '.join(supplied_defaults)}", Call([bound[name] for name in required])))
    changed = {
        p.name: _other_scalar(bound[p.name] if p.name in bound else p.default)
        for p in parameters
        if _is_scalar(bound[p.name] if p.name in bound else p.default)
    }
    if changed:
        label = ", ".join(f"{name}={value!r}" for name, value in changed.items())
        variants.append((label, Call([], {**bound, **changed})))
    return variants


def _init_variants(init_inputs: list[Any]) -> list[tuple[str, list[Any]]]:
    """Other constructor values: every float and bool changed at once, and every int changed at once."""
    variants = []
    for kinds, label in (((float, bool), "other float/bool constructor values"), ((int,), "other int constructor values")):
        changed = [
            _other_scalar(value) if _is_scalar(value) and type(value) in kinds else value for value in init_inputs
        ]
        if changed != list(init_inputs):
            details = ", ".join(f"{old!r}->{new!r}" for old, new in zip(init_inputs, changed) if old != new)
            variants.append((f"{label} ({details})", changed))
    return variants


def _is_scalar(value: Any) -> bool:
    return type(value) in (bool, int, float)


def _other_scalar(value: Any) -> Any:
    if type(value) is bool:
        return not value
    if type(value) is int:
        return value + 1
    return value * 1.5 + 0.25


def _interior_changed(old: list[Any], new: list[Any]) -> list[Any]:
    """`old`'s tensors with their middle half (in memory order) taken from `new`: the first and last values stay."""
    changed = []
    for before, after in zip(old, new):
        if isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor) and before.shape == after.shape \
                and before.numel() > 2:
            mixed = before.clone().reshape(-1)
            quarter = mixed.numel() // 4
            mixed[quarter : mixed.numel() - quarter] = after.reshape(-1)[quarter : mixed.numel() - quarter]
            changed.append(mixed.reshape(before.shape))
        else:
            changed.append(after)
    return changed


def _shifted(values: list[Any], steps: int) -> list[Any]:
    """The same values moved `steps` places along memory order: the same distribution, other values everywhere."""
    return [torch.roll(v.reshape(-1), steps).reshape(v.shape) if isinstance(v, torch.Tensor) and v.numel() > 1 else v
            for v in values]


def _non_contiguous(value: torch.Tensor) -> torch.Tensor:
    """The same values in another layout: the last two dims transposed in memory, or every other element."""
    if value.dim() >= 2 and value.shape[-1] > 1 and value.shape[-2] > 1:
        return value.mT.contiguous().mT
    if value.dim() >= 1 and value.numel() > 1:
        spread = torch.empty((*value.shape[:-1], value.shape[-1] * 2), dtype=value.dtype)
        strided = spread[..., ::2]
        strided.copy_(value)
        return strided
    return value


def _to_device(call: Call, device: torch.device) -> tuple[list, dict]:
    def move(value):
        return value.to(device) if isinstance(value, torch.Tensor) else value

    return [move(v) for v in call.args], {k: move(v) for k, v in call.kwargs.items()}


def _cpu_state(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {name: value.detach().cpu() for name, value in model.state_dict().items()}


def _index_errors_ruin_the_process(device: torch.device) -> bool:
    """Whether PyTorch's kernels on `device` meet an out-of-range index (a class target in gather or nll_loss, a token
    id in embedding) with a device assert, after which every call on the device fails in this process, rather than
    with an error the process survives (the CPU's IndexError or RuntimeError)."""
    return device.type == "cuda"


def _has_index_inputs(inputs: list) -> bool:
    return any(
        isinstance(value, torch.Tensor) and not value.is_floating_point() and value.dtype != torch.bool
        for value in inputs
    )


def _reference_failure(reference: torch.nn.Module, call: Call) -> str:
    """Why the reference raises on this call (empty if it runs)."""
    try:
        with torch.no_grad():
            reference(*[_clone(value) for value in call.args], **{name: _clone(value) for name, value in call.kwargs.items()})
    except Exception as error:  # noqa: BLE001 - any failure means the task rejects these sizes
        return f"{type(error).__name__}: {str(error)[:200]}"
    return ""


def _shape_of(value: Any) -> list[int] | None:
    return list(value.shape) if isinstance(value, torch.Tensor) else None


def _discover_symbolic_shapes(reference, example, directory) -> dict[str, Any] | None:
    """Ask torch.export which input sizes are free; None if the task cannot be exported."""
    try:
        with torch.no_grad():
            exported, _dynamic = export_program(reference, tuple(example), task_file(directory))
        graph = graph_from_exported(exported, None)
    except Exception:  # noqa: BLE001 - odd shapes are a bonus; without export, only the given sizes run
        return None
    user_inputs = [g for g in graph.inputs if g.kind == "user_input"]
    return {
        "inputs": [list(g.spec.shape) if g.spec else None for g in user_inputs],
        "ranges": graph.symbol_ranges,
    }


def _identical(before: Any, now: Any) -> bool:
    """The same value, bit for bit (NaN equal to NaN)."""
    if not isinstance(before, torch.Tensor) or not isinstance(now, torch.Tensor):
        return before == now
    if before.shape != now.shape or before.dtype != now.dtype:
        return False
    return bool(torch.equal(before.reshape(-1).view(torch.uint8), now.reshape(-1).contiguous().view(torch.uint8)))


def _matches(expected: list, actual: list) -> bool:
    try:
        _compare(expected, actual, Tally(), "previous")
    except Rejected:
        return False
    return True


# A float output outside the dtype's tolerance of eager PyTorch is judged against a float64 run of the
# reference: it passes when its error is at most this multiple of eager's own error (plus atol).
# Eager's result is an approximation too (another summation order, another rounding of exp(...)).
ARBITER_FACTOR = 2.0


def _float64_outputs(widened: torch.nn.Module | None, call: Call, device: torch.device) -> list | None:
    """The float64 reference's outputs on `call` (floating inputs widened), or None: also when two runs from other
    random seeds differ (a reference that draws random numbers has no exact result to arbitrate with: eager's own
    "error" would be the spread of its draws, and any candidate within twice that would pass)."""
    if widened is None:
        return None
    runs = []
    try:
        args, kwargs = _to_device(call, device)
        for seed in (1, 2):
            with torch.no_grad(), torch.random.fork_rng():
                torch.manual_seed(seed)
                runs.append(flat_values(widened(*[_widen(v) for v in args], **{k: _widen(v) for k, v in kwargs.items()})))
    except Exception:  # noqa: BLE001 - without a float64 reference, the dtype tolerance decides alone
        return None
    return runs[0] if _matches(runs[0], runs[1]) else None


def _widen(value: Any) -> Any:
    return value.double() if isinstance(value, torch.Tensor) and value.is_floating_point() else value


def _arbitrate(want: torch.Tensor, got: torch.Tensor, exact: torch.Tensor, atol: float) -> tuple[bool, float, float]:
    """(candidate no less accurate than eager, candidate's max error, eager's max error) against float64."""
    exact = exact.to(want.device, torch.float64)
    want64, got64 = want.to(torch.float64), got.to(torch.float64)
    if not (bool(torch.isfinite(exact).all()) and bool(torch.isfinite(got64).all())):
        return False, math.inf, math.inf
    candidate_error = float((got64 - exact).abs().max())
    eager_error = float((want64 - exact).abs().max())
    return candidate_error <= ARBITER_FACTOR * eager_error + atol, candidate_error, eager_error


def _compare(
    expected: list,
    actual: list,
    tally: Tally,
    label: str,
    exact_outputs: Callable[[], list | None] | None = None,
) -> None:
    """Raise Rejected unless `actual` matches `expected`; exact_outputs gives float64 outputs to arbitrate."""
    exact: list | None = None
    if len(expected) != len(actual):
        raise Rejected("wrong_result", f"{label}: {len(actual)} outputs, expected {len(expected)}")
    for index, (want, got) in enumerate(zip(expected, actual)):
        if not isinstance(want, torch.Tensor):
            if want != got:
                raise Rejected("wrong_result", f"{label}: output {index} is {got!r}, expected {want!r}")
            continue
        if not isinstance(got, torch.Tensor):
            raise Rejected("wrong_result", f"{label}: output {index} is a {type(got).__name__}, expected a tensor")
        if tuple(got.shape) != tuple(want.shape):
            raise Rejected("wrong_result", f"{label}: output {index} has shape {list(got.shape)}, expected {list(want.shape)}")
        if got.dtype != want.dtype:
            raise Rejected("wrong_result", f"{label}: output {index} has dtype {got.dtype}, expected {want.dtype}")
        tolerance = tolerance_for(want.dtype, tf32=tally.tf32, interpreter=tally.interpreter)
        dtype_label = str(want.dtype).removeprefix("torch.")
        if tally.tf32 and want.dtype == torch.float32:
            dtype_label += " (tf32)"
        elif tally.interpreter and want.dtype == torch.bfloat16:
            dtype_label += " (interpreter)"
        tally.tolerance[dtype_label] = tolerance
        abs_err, rel_err, mismatches = _errors(want, got, tolerance)
        tally.max_abs_err = max(tally.max_abs_err, abs_err)
        tally.max_rel_err = max(tally.max_rel_err, rel_err)
        if not mismatches:
            continue
        problem = (
            f"{label}: output {index} ({dtype_label}): {mismatches} of {want.numel()} elements outside "
            f"atol={tolerance['atol']:g}, rtol={tolerance['rtol']:g} of eager (max abs err {abs_err:.3g})"
        )
        if want.is_floating_point() and exact_outputs is not None:
            exact = exact if exact is not None else exact_outputs()
            if exact is not None and index < len(exact):
                accurate, candidate_error, eager_error = _arbitrate(want, got, exact[index], tolerance["atol"])
                verdict = (
                    f"{problem}; against float64: candidate max error {candidate_error:.3g}, "
                    f"eager {eager_error:.3g}"
                )
                if accurate:
                    tally.arbitrated.append(verdict)
                    continue
                raise Rejected("wrong_result", verdict)
        raise Rejected("wrong_result", problem)


def _errors(want: torch.Tensor, got: torch.Tensor, tolerance: dict[str, float]) -> tuple[float, float, int]:
    if not want.is_floating_point():
        mismatches = int((want != got).sum())
        return (0.0 if mismatches == 0 else math.inf), 0.0, mismatches
    want64 = want.detach().to(torch.float64)
    got64 = got.detach().to(torch.float64)
    close = torch.isclose(got64, want64, rtol=tolerance["rtol"], atol=tolerance["atol"], equal_nan=True)
    both_finite = torch.isfinite(want64) & torch.isfinite(got64)
    difference = (got64 - want64).abs()
    if bool(both_finite.any()):
        abs_err = float(difference[both_finite].max())
        rel_err = float((difference / want64.abs().clamp_min(1e-6))[both_finite].max())
    else:
        abs_err = rel_err = 0.0
    if not bool(both_finite.all()) and not bool(close.all()):
        abs_err = math.inf
    return abs_err, rel_err, int((~close).sum())


def _clone(value: Any) -> Any:
    return value.clone() if isinstance(value, torch.Tensor) else value


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)
