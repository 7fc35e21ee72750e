"""The worker's `benchmark` method: eager, torch.compile and the candidate, timed in one process.

Method: CUDA events around each call, L2 flushed before every call, warm-up first, median of
many. A host-side clock with a device-wide synchronize runs alongside: if the candidate's
host time exceeds its event time far more than eager's does, work escaped the timed stream,
and the host time is used instead (and flagged).
"""

from __future__ import annotations

import statistics
import time
from typing import Any, Callable

import torch

from drtriton_lsp.engine.task import Task, load_module_from_source
from drtriton_lsp.engine.task_runtime import CANDIDATE_MODULE_NAME, build_model, draw_inputs, load_task, scratch_directory

L2_FLUSH_BYTES = 256 * 1024**2  # over 4x the H200's 60 MB L2
WARMUP_CALLS = 5
MIN_CALLS = 10
MAX_CALLS = 200
TIME_BUDGET_S = 2.0
IMPLAUSIBLE_SPEEDUP = 10.0
HIDDEN_WORK_SLACK_MS = 0.05


def run_benchmark(params: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    if not torch.cuda.is_available():
        return {"timing": None, "reason": "no CUDA GPU in the worker: no speed is measured on the CPU"}
    task = Task.from_json(params["task"])
    device = torch.device("cuda")
    directory = scratch_directory()
    task_module = load_task(task, directory)
    candidate_module = load_module_from_source(params["candidate"], CANDIDATE_MODULE_NAME, directory)
    eager = build_model(task, task_module, directory, seed=0).to(device)
    init_inputs = task_module.get_init_inputs() if hasattr(task_module, "get_init_inputs") else []
    torch.manual_seed(0)
    candidate = candidate_module.ModelNew(*init_inputs).eval().to(device)
    try:
        candidate.load_state_dict(eager.state_dict(), strict=True)
    except RuntimeError:
        pass  # parameters laid out differently; timing does not depend on their values
    inputs = [v.to(device) if isinstance(v, torch.Tensor) else v for v in draw_inputs(task, task_module, directory, 7)]
    flush_buffer = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device)

    results: dict[str, Any] = {}
    with torch.no_grad():
        progress("timing eager PyTorch")
        results["eager"] = time_calls(lambda: eager(*inputs), flush_buffer)
        progress("compiling and timing torch.compile")
        compile_note = ""
        try:
            compiled = torch.compile(eager)
            results["compile"] = time_calls(lambda: compiled(*inputs), flush_buffer)
        except Exception as error:  # noqa: BLE001 - torch.compile failing is a fact to report, not a crash
            compile_note = f"torch.compile failed: {type(error).__name__}: {str(error)[:200]}"
            results["compile"] = None
        progress("timing the Triton candidate")
        results["triton"] = time_calls(lambda: candidate(*inputs), flush_buffer)

    eager_ms = results["eager"]["median_ms"]
    triton = results["triton"]
    hidden_work = _hidden_work(results["eager"], triton)
    triton_ms = triton["median_host_ms"] if hidden_work else triton["median_ms"]
    compile_ms = results["compile"]["median_ms"] if results["compile"] else None
    speedup_vs_eager = eager_ms / triton_ms
    speedup_vs_compile = compile_ms / triton_ms if compile_ms else None
    flags = []
    if hidden_work:
        flags.append("work_outside_timed_stream")
    if speedup_vs_eager > IMPLAUSIBLE_SPEEDUP or (speedup_vs_compile or 0) > IMPLAUSIBLE_SPEEDUP:
        flags.append("implausible_speedup")
    return {
        "timing": {
            "eager_ms": eager_ms,
            "compile_ms": compile_ms,
            "triton_ms": triton_ms,
            "speedup_vs_eager": speedup_vs_eager,
            "speedup_vs_compile": speedup_vs_compile,
            "method": (
                f"CUDA events per call, L2 flushed ({L2_FLUSH_BYTES // 1024**2} MiB write) before each, "
                f"{WARMUP_CALLS} warm-up calls, median of {triton['calls']}+ calls; inputs as get_inputs() gives them"
            ),
            "calls": {name: (r["calls"] if r else 0) for name, r in results.items()},
            "flags": flags,
            "notes": compile_note,
        },
        "reason": "",
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
            candidate = module.ModelNew().eval().to(device)
            candidate_ms.append(time_calls(lambda: candidate(*inputs), flush_buffer)["median_ms"])
    return {"reference_ms": reference_ms, "candidate_ms": candidate_ms}


def time_calls(function: Callable[[], Any], flush_buffer: torch.Tensor) -> dict[str, Any]:
    """Median event time and median host time (device synchronized) of repeated calls."""
    for _ in range(WARMUP_CALLS):
        function()
    torch.cuda.synchronize()
    event_ms: list[float] = []
    host_ms: list[float] = []
    started = time.perf_counter()
    while len(event_ms) < MAX_CALLS and (len(event_ms) < MIN_CALLS or time.perf_counter() - started < TIME_BUDGET_S):
        flush_buffer.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        host_start = time.perf_counter()
        start.record()
        function()
        end.record()
        torch.cuda.synchronize()  # waits for every stream, so host time includes all work
        host_ms.append((time.perf_counter() - host_start) * 1e3)
        event_ms.append(start.elapsed_time(end))
    return {"median_ms": statistics.median(event_ms), "median_host_ms": statistics.median(host_ms), "calls": len(event_ms)}


def _hidden_work(eager: dict[str, Any], candidate: dict[str, Any]) -> bool:
    """True when the candidate's host-vs-event gap is far beyond eager's: work on another stream."""
    eager_gap = eager["median_host_ms"] - eager["median_ms"]
    candidate_gap = candidate["median_host_ms"] - candidate["median_ms"]
    return candidate_gap > 2 * max(eager_gap, 0.0) + HIDDEN_WORK_SLACK_MS + 0.5 * candidate["median_ms"]
