"""The worker's `benchmark` method: eager, torch.compile and the candidate, timed in one process (and, when asked,
torch.compile's `max-autotune` mode too: the strongest baseline a user can turn on, which compiles for minutes).

Two measures per callable, both with CUDA events, the L2 flushed before every call and warm-up first:
- device time (the speed figures): calls queued back to back, as triton.testing.do_bench and
  Inductor's benchmarker time kernels; the host runs ahead, so the launch cost on the host is hidden
  as it is in a model whose GPU queue is busy;
- call latency: each call issued to an idle GPU (synchronized before), so the host's launch cost is
  included, as it is for a lone call. A host clock with a device-wide synchronize runs alongside: if
  the candidate's host time exceeds its event time far more than eager's does, work escaped the timed
  stream, and the host time is used instead (and flagged).
A candidate whose dispatch replays CUDA graphs is also timed with the replay off, in the same process (`replay`: what
`optimize` chooses the written form by; `plain_timing`: the timing it reports when it keeps the plain form).
"""

from __future__ import annotations

import os
import statistics
import types
import time
from typing import Any, Callable

import torch

from drtriton_lsp.source.dispatch import declares_replay
from drtriton_lsp.task import Task, load_module_from_source
from drtriton_lsp.worker.candidate_process import REPLAY_SWITCH
from drtriton_lsp.worker.gpu_lock import gpu_hold
from drtriton_lsp.worker.task_runtime import CANDIDATE_MODULE_NAME, build_model, draw_inputs, load_task, scratch_directory

L2_FLUSH_BYTES = 256 * 1024**2  # over 4x the H200's 60 MB L2
WARMUP_CALLS = 5
MIN_CALLS = 10
MAX_CALLS = 200
TIME_BUDGET_S = 2.0  # per measure and callable
IMPLAUSIBLE_SPEEDUP = 10.0
HIDDEN_WORK_SLACK_MS = 0.05
# the results' name of torch.compile timed in mode "max-autotune"
MAX_AUTOTUNE = "compile_max_autotune"


def run_benchmark(params: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    if not torch.cuda.is_available():
        return {"timing": None, "reason": "no CUDA GPU in the worker: no speed is measured on the CPU"}
    task = Task.from_json(params["task"])
    device = torch.device("cuda")
    directory = scratch_directory()
    task_module = load_task(task, directory)
    candidate_module = load_module_from_source(params["candidate"], CANDIDATE_MODULE_NAME, directory)
    eager = build_model(task, task_module, directory, seed=0).to(device)
    candidate = candidate_model(candidate_module, task_module, eager, device)
    inputs = [v.to(device) if isinstance(v, torch.Tensor) else v for v in draw_inputs(task, task_module, directory, 7)]
    flush_buffer = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device)

    results: dict[str, Any] = {}
    notes: list[str] = []
    with torch.no_grad():
        progress("timing eager PyTorch")
        results["eager"] = time_calls(lambda: eager(*inputs), flush_buffer)
        progress("compiling and timing torch.compile")
        results["compile"] = _time_compiled(eager, inputs, flush_buffer, None, notes)
        if params.get("max_autotune"):
            progress("compiling (for minutes) and timing torch.compile in mode max-autotune")
            torch._dynamo.reset()  # the default mode's compiled code is not reused for the other mode
            results[MAX_AUTOTUNE] = _time_compiled(eager, inputs, flush_buffer, "max-autotune", notes)
        progress("timing the Triton candidate")
        results["triton"] = time_calls(lambda: candidate(*inputs), flush_buffer)
        plain = None
        if declares_replay(params["candidate"]):
            progress("timing the Triton candidate without its CUDA-graph replay")
            plain = _time_plainly(candidate, inputs, flush_buffer)

    timing = _timing(results, notes)
    plain_timing = None
    if plain is not None:
        timing["replay"] = {"replayed_ms": results["triton"]["median_ms"], "plain_ms": plain["median_ms"]}
        # what `optimize` reports when it keeps the module written without replay: its baselines timed here too
        plain_timing = _timing(
            {**results, "triton": plain}, [*notes, "the forward timed with its CUDA-graph replay off, beside the replayed form"]
        )
    return {"timing": timing, "plain_timing": plain_timing, "reason": ""}


def _timing(results: dict[str, Any], notes: list[str]) -> dict[str, Any]:
    """The report's timing of the candidate timed as results["triton"], against the baselines in `results`."""
    triton = results["triton"]
    hidden_work = _hidden_work(results["eager"], triton)
    # with work outside the timed stream, only the host clock is trusted for the candidate
    device_time = speedups(results, "median_host_ms" if hidden_work else "median_ms")
    latency = speedups(results, "median_host_ms" if hidden_work else "median_latency_ms")
    flags = []
    if hidden_work:
        flags.append("work_outside_timed_stream")
    if device_time["speedup_vs_eager"] > IMPLAUSIBLE_SPEEDUP or (device_time["speedup_vs_compile"] or 0) > IMPLAUSIBLE_SPEEDUP:
        flags.append("implausible_speedup")
    return {
        **device_time,
        "latency": latency,
        "method": (
            f"CUDA events per call, L2 flushed ({L2_FLUSH_BYTES // 1024**2} MiB write) before each, "
            f"{WARMUP_CALLS} warm-up calls, median of {triton['calls']}+ calls queued back to back (device time); "
            "latency: the same calls each issued to an idle GPU, host launch included; "
            "inputs as get_inputs() gives them"
            + ("; torch.compile timed in its default mode and in mode max-autotune" if MAX_AUTOTUNE in results else "")
        ),
        "calls": {name: (r["calls"] if r else 0) for name, r in results.items()},
        "flags": flags,
        "notes": "; ".join(notes),
        # a candidate that replays CUDA graphs: its device time with the replay on and off (set by run_benchmark)
        "replay": None,
    }


def _time_plainly(candidate: torch.nn.Module, inputs: list[Any], flush_buffer: torch.Tensor) -> dict[str, Any]:
    """`time_calls` of the candidate with its written-back dispatch's CUDA-graph replay switched off,
    as a module written back without replay runs (the dispatch reads the switch on every call)."""
    before = os.environ.get(REPLAY_SWITCH)
    os.environ[REPLAY_SWITCH] = "0"
    try:
        return time_calls(lambda: candidate(*inputs), flush_buffer)
    finally:
        if before is None:
            del os.environ[REPLAY_SWITCH]
        else:
            os.environ[REPLAY_SWITCH] = before


def _time_compiled(eager, inputs, flush_buffer, mode: str | None, notes: list[str]) -> dict[str, Any] | None:
    """`time_calls` of `torch.compile(eager, mode=mode)`; None (and a note) when torch.compile fails."""
    try:
        compiled = torch.compile(eager, mode=mode)
        return time_calls(lambda: compiled(*inputs), flush_buffer)
    except Exception as error:  # noqa: BLE001 - torch.compile failing is a fact to report, not a crash
        notes.append(f"torch.compile{f' (mode {mode})' if mode else ''} failed: {type(error).__name__}: {str(error)[:200]}")
        return None


def speedups(results: dict[str, Any], measure: str) -> dict[str, Any]:
    """Eager, torch.compile (and its max-autotune mode, None unless timed) and Triton times under one measure of
    `time_calls` (the candidate's under `measure`, the baselines' under the same measure unless it is the host
    clock), and the speedups."""
    baseline_measure = "median_latency_ms" if measure == "median_host_ms" else measure

    def baseline_ms(name: str) -> float | None:
        measured = results.get(name)
        return measured[baseline_measure] if measured else None

    eager_ms, compile_ms, tuned_ms = baseline_ms("eager"), baseline_ms("compile"), baseline_ms(MAX_AUTOTUNE)
    triton_ms = results["triton"][measure]
    return {
        "eager_ms": eager_ms,
        "compile_ms": compile_ms,
        "compile_max_autotune_ms": tuned_ms,
        "triton_ms": triton_ms,
        "speedup_vs_eager": eager_ms / triton_ms,
        "speedup_vs_compile": compile_ms / triton_ms if compile_ms else None,
        "speedup_vs_compile_max_autotune": tuned_ms / triton_ms if tuned_ms else None,
    }


def run_candidate_timing(params: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """The worker's `time_candidates` method: the task's eager time and each candidate's, in one process.

    For search, where candidates were verified already: no torch.compile, same inputs for all.
    """
    task = Task.from_json(params["task"])
    device = torch.device("cuda")
    directory = scratch_directory()
    task_module = load_task(task, directory)
    eager = build_model(task, task_module, directory, seed=0).to(device)
    inputs = [v.to(device) if isinstance(v, torch.Tensor) else v for v in draw_inputs(task, task_module, directory, 7)]
    flush_buffer = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device)
    candidate_ms: list[float] = []
    with torch.no_grad():
        reference_ms = time_calls(lambda: eager(*inputs), flush_buffer)["median_ms"]
        for index, source in enumerate(params["candidates"]):
            progress(f"timing candidate {index + 1}/{len(params['candidates'])}")
            module = load_module_from_source(source, f"{CANDIDATE_MODULE_NAME}_{index}", directory)
            candidate = candidate_model(module, task_module, eager, device)
            candidate_ms.append(time_calls(lambda model=candidate: model(*inputs), flush_buffer)["median_ms"])
    return {"reference_ms": reference_ms, "candidate_ms": candidate_ms}


def candidate_model(
    candidate_module: types.ModuleType, task_module: types.ModuleType, eager: torch.nn.Module, device: torch.device
) -> torch.nn.Module:
    """`ModelNew` built as the task builds `Model` (its `get_init_inputs()`, seed 0), with eager's weights where
    their layout matches (timing does not depend on their values, but a candidate may take another path without)."""
    init_inputs = task_module.get_init_inputs() if hasattr(task_module, "get_init_inputs") else []
    torch.manual_seed(0)
    candidate = candidate_module.ModelNew(*init_inputs).eval().to(device)
    try:
        candidate.load_state_dict(eager.state_dict(), strict=True)
    except RuntimeError:
        pass  # parameters laid out differently
    return candidate


def time_calls(function: Callable[[], Any], flush_buffer: torch.Tensor) -> dict[str, Any]:
    """Median device time (calls queued back to back), and median call latency and host time (each call
    issued to an idle GPU, the device synchronized after it) of repeated calls."""
    for _ in range(WARMUP_CALLS):
        function()  # the first calls compile (torch.compile, Triton's JIT): outside the exclusive hold
    torch.cuda.synchronize()
    with gpu_hold(exclusive=True):
        return _timed_calls(function, flush_buffer)


def _timed_calls(function: Callable[[], Any], flush_buffer: torch.Tensor) -> dict[str, Any]:
    latency_ms: list[float] = []
    host_ms: list[float] = []
    started = time.perf_counter()
    while len(latency_ms) < MAX_CALLS and (len(latency_ms) < MIN_CALLS or time.perf_counter() - started < TIME_BUDGET_S):
        flush_buffer.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        host_start = time.perf_counter()
        start.record()
        function()
        end.record()
        torch.cuda.synchronize()  # waits for every stream, so host time includes all work
        host_ms.append((time.perf_counter() - host_start) * 1e3)
        latency_ms.append(start.elapsed_time(end))
    device_ms = queued_device_times(function, flush_buffer, calls=len(latency_ms))
    return {
        "median_ms": statistics.median(device_ms),
        "calls": len(device_ms),
        "median_latency_ms": statistics.median(latency_ms),
        "median_host_ms": statistics.median(host_ms),
    }


def queued_device_times(function: Callable[[], Any], flush_buffer: torch.Tensor, calls: int) -> list[float]:
    """Event times of `calls` calls enqueued without waiting: each flush gives the host time to enqueue the
    next call before the GPU reaches it, so an event pair spans the device's work, not the host's launch."""
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(calls)]
    for start, end in events:
        flush_buffer.zero_()
        start.record()
        function()
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(end) for start, end in events]


def _hidden_work(eager: dict[str, Any], candidate: dict[str, Any]) -> bool:
    """True when the candidate's host-vs-event gap is far beyond eager's: work on another stream."""
    eager_gap = eager["median_host_ms"] - eager["median_latency_ms"]
    candidate_gap = candidate["median_host_ms"] - candidate["median_latency_ms"]
    return candidate_gap > 2 * max(eager_gap, 0.0) + HIDDEN_WORK_SLACK_MS + 0.5 * candidate["median_latency_ms"]
