"""`drtriton bench`: run a directory of KernelBench-form problems through the pipeline, one at a time.

Problems are found and categorised by reading their source (never importing it here); each runs
in worker processes through `optimize_target` and is placed against ceilings measured in the same run.
"""

from __future__ import annotations

import ast
import concurrent.futures
import datetime
import json
import math
import os
import statistics
import subprocess
import threading
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from drtriton_lsp.bench.roofline import BANDWIDTH_TARGET, LIBRARY_TARGET, GraphWork, graph_work
from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.engine.gpu_memory import GpuMemory
from drtriton_lsp.engine.pipeline import OptimizeOptions, Outcome, optimize_target
from drtriton_lsp.engine.report import worth_writing_back
from drtriton_lsp.engine.session import WorkerSession
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.local import LocalRunner
from drtriton_lsp.runners.runner import JobFailure, JobLimits, Runner

RESULTS_SCHEMA = "drtriton.bench/1"
# Directory names that say a problem's category when its file has no CATEGORY constant (KernelBench's levels too).
CATEGORY_DIRECTORIES = {
    "single_op": "single_op",
    "single-op": "single_op",
    "level1": "single_op",
    "fusion": "fusion",
    "level2": "fusion",
}
UNCATEGORIZED = "uncategorized"
CEILING_LIMITS = JobLimits(timeout_s=300)

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Problem:
    """A problem file; name is its path relative to the suite directory (with "/" separators)."""

    path: Path
    name: str
    category: str


def find_problems(directory: Path) -> tuple[list[Problem], list[str]]:
    """Every KernelBench-form file under `directory` (sorted by name), and the names of the .py files skipped."""
    problems, skipped = [], []
    for path in sorted(directory.rglob("*.py")):
        name = path.relative_to(directory).as_posix()
        try:
            tree = ast.parse(path.read_text(encoding="utf-8"))
        except (SyntaxError, UnicodeDecodeError):
            skipped.append(name)
            continue
        if not is_kernelbench_form(tree):
            skipped.append(name)
            continue
        folders = [directory.name, *path.relative_to(directory).parent.parts]
        problems.append(Problem(path, name, problem_category(tree, folders)))
    return problems, skipped


def select_problems(directory: Path, match: str | None, limit: int | None) -> tuple[list[Problem], list[str]]:
    """The problems `drtriton bench` runs: those whose name contains `match`, the first `limit` of them."""
    if not directory.is_dir():
        raise DrtritonError(f"{directory} is not a directory", "pass the folder that holds the problem files")
    problems, skipped = find_problems(directory)
    if not problems:
        raise DrtritonError(
            f"no KernelBench-form problem file in {directory}",
            "a problem file defines class Model(nn.Module), get_inputs() and get_init_inputs()",
        )
    if match:
        problems = [problem for problem in problems if match in problem.name]
        if not problems:
            raise DrtritonError(f"no problem in {directory} has {match!r} in its name", "check --match")
    return problems[:limit], skipped


def is_kernelbench_form(tree: ast.Module) -> bool:
    """A top-level `class Model`, `def get_inputs` and `def get_init_inputs`."""
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    return "Model" in classes and {"get_inputs", "get_init_inputs"} <= functions


def problem_category(tree: ast.Module, folders: list[str]) -> str:
    """The module's `CATEGORY = "..."` constant, else the nearest folder named like a category."""
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and any(isinstance(target, ast.Name) and target.id == "CATEGORY" for target in node.targets)
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value.strip().lower().replace("-", "_")
    for folder in reversed(folders):
        if folder.lower() in CATEGORY_DIRECTORIES:
            return CATEGORY_DIRECTORIES[folder.lower()]
    return UNCATEGORIZED


class CapturingRunner:
    """Passes a problem's jobs to `runner` (the part of the Runner protocol the pipeline uses: host, call, close),
    keeping the graph the pipeline's capture job returned (for bytes and FLOPs)."""

    def __init__(self, runner: Runner) -> None:
        self.runner = runner
        self.captured_graph: dict[str, Any] | None = None

    @property
    def host(self) -> str | None:
        return self.runner.host

    def call(self, method: str, params: dict[str, Any], **options: Any) -> Any:
        result = self.runner.call(method, params, **options)
        if method == "capture" and self.captured_graph is None:
            self.captured_graph = result["graph"]
        return result

    def close(self) -> None:
        self.runner.close()


def measure_copy_bandwidth(runner: Runner, progress: Progress) -> dict[str, Any] | None:
    """The GPU's device-to-device copy bandwidth, measured in a worker now."""
    measured = runner.call("ceilings", {"copy": True}, limits=CEILING_LIMITS, on_progress=progress)
    return measured["copy"]


def run_problem(
    problem: Problem,
    options: OptimizeOptions,
    copy_ceiling: dict[str, Any] | None,
    progress: Progress,
    cancel: threading.Event | None = None,
    new_runner: Callable[[], Runner] = LocalRunner,
    gpu_memory: GpuMemory | None = None,
) -> dict[str, Any]:
    """Optimize one problem's Model and record its verdict, times and position against the ceilings.
    new_runner: makes the runner of the problem's jobs (one per problem, closed at its end); gpu_memory: the GPU's
    room shared with the problems run beside this one."""
    started = time.monotonic()
    runner = CapturingRunner(new_runner())
    outcome: Outcome | None = None
    failure: tuple[str, str] | None = None
    try:
        session = WorkerSession.for_file(
            runner, str(problem.path), progress=progress, cancel=cancel, gpu_memory=gpu_memory
        )
        outcome = optimize_target(
            problem.path.read_text(encoding="utf-8"), str(problem.path), "Model", options=options, session=session
        )
    except DrtritonError as error:
        failure = (snake_case_name(type(error).__name__), error.located() + (f" ({error.hint})" if error.hint else ""))
    except Exception as error:  # noqa: BLE001 - a drtriton bug: record it and go on with the suite
        failure = ("internal_error", f"{type(error).__name__}: {error}\n{traceback.format_exc()[-1500:]}")
    finally:
        runner.close()  # a worker started ahead for a step that did not come must not outlive the problem
    graph = OpGraph.from_json(runner.captured_graph) if runner.captured_graph else None
    work = graph_work(graph) if graph else None
    library = None
    if outcome and outcome.report["timing"] and work and work.matmul_class and work.matmul_flops:
        progress("timing torch.matmul on the same shapes (the library's ceiling)")
        library = measure_library(runner, work, bool(outcome.program and outcome.program.tf32), progress)
    return build_record(
        problem,
        report=outcome.report if outcome else None,
        failure=failure,
        dtypes=graph_dtypes(graph) if graph else [],
        work=work,
        copy_ceiling=copy_ceiling,
        library=library,
        seconds=time.monotonic() - started,
    )


def measure_library(runner: Runner, work: GraphWork, tf32: bool, progress: Progress) -> dict[str, Any]:
    """torch.matmul's time on the problem's products, or {"error": ...} if the worker fails (the run goes on)."""
    params = {"matmuls": work.to_json()["matmuls"], "tf32": tf32}
    try:
        return runner.call("ceilings", params, limits=CEILING_LIMITS, on_progress=progress)["matmul"]
    except (JobFailure, DrtritonError) as error:
        return {"error": str(error)}


def build_record(
    problem: Problem,
    *,
    report: dict[str, Any] | None,
    failure: tuple[str, str] | None,
    dtypes: list[str],
    work: GraphWork | None,
    copy_ceiling: dict[str, Any] | None,
    library: dict[str, Any] | None,
    seconds: float,
) -> dict[str, Any]:
    """One problem's line in results.json: a report (pipeline finished) or a failure (reason, message)."""
    record: dict[str, Any] = {
        "problem": problem.name,
        "category": problem.category,
        "dtypes": dtypes,
        "status": "error",
        "reason": failure[0] if failure else None,
        "message": failure[1] if failure else "",
        "timing": None,
        "work": work.to_json() if work else None,
        "roofline": None,
        "replaced_ops": [],
        "kept_ops": [],
        "seconds": round(seconds, 1),
        "report": report,
    }
    if report is None:
        return record
    correctness = report["correctness"] or {}
    verified = report["status"] == "verified"
    record.update(
        status=report["status"],
        reason=None if verified else correctness.get("reason") or report["status"],
        message=report["message"] or ("" if report["timing"] else report["timing_note"]),
        replaced_ops=report["replaced_ops"],
        kept_ops=report["kept_ops"],
    )
    timing = report["timing"]
    if timing:
        record["timing"] = {
            key: timing.get(key)
            for key in (
                "eager_ms", "compile_ms", "compile_max_autotune_ms", "triton_ms", "speedup_vs_eager", "speedup_vs_compile",
                "speedup_vs_compile_max_autotune", "latency", "flags",
            )
        }
        record["roofline"] = roofline_position(timing, work, copy_ceiling, library)
    return record


def roofline_position(
    timing: dict[str, Any],
    work: GraphWork | None,
    copy_ceiling: dict[str, Any] | None,
    library: dict[str, Any] | None,
) -> dict[str, Any]:
    """Achieved bandwidth against the copy bandwidth, and for matmul-class problems achieved FLOP rate
    against the library's; "fraction" is the one that bounds the problem (FLOPs for matmul-class)."""
    bytes_moved = work.minimum_bytes if work else None
    copy_rate = copy_ceiling["gb_per_s"] if copy_ceiling else None

    def bandwidth(ms: float | None) -> float | None:
        return bytes_moved / ms / 1e6 if bytes_moved and ms else None

    def bandwidth_fraction(ms: float | None) -> float | None:
        rate = bandwidth(ms)
        return rate / copy_rate if rate and copy_rate else None

    position: dict[str, Any] = {
        "bytes": bytes_moved,
        "triton_gb_per_s": bandwidth(timing["triton_ms"]),
        "copy_gb_per_s": copy_rate,
        "bandwidth_fraction": bandwidth_fraction(timing["triton_ms"]),
        "compile_bandwidth_fraction": bandwidth_fraction(timing.get("compile_ms")),
        "matmul_flops": work.matmul_flops if work else None,
        "triton_tflops": None,
        "library_tflops": None,
        "library_ms": None,
        "flop_fraction": None,
        "compile_flop_fraction": None,
        "library_tf32": None,
        "library_error": library.get("error") if library else None,
    }
    matmul_class = bool(work and work.matmul_class)
    if matmul_class and work.matmul_flops and library and "ms" in library:
        position.update(
            triton_tflops=work.matmul_flops / timing["triton_ms"] / 1e9,
            library_tflops=library["tflops"],
            library_ms=library["ms"],
            # same FLOPs in both rates, so the ratio of rates is the ratio of times
            flop_fraction=library["ms"] / timing["triton_ms"],
            compile_flop_fraction=library["ms"] / timing["compile_ms"] if timing.get("compile_ms") else None,
            library_tf32=library["tf32"],
        )
    position["ceiling"] = "library" if matmul_class else "copy"
    position["fraction"] = position["flop_fraction"] if matmul_class else position["bandwidth_fraction"]
    position["compile_fraction"] = (
        position["compile_flop_fraction"] if matmul_class else position["compile_bandwidth_fraction"]
    )
    return position


def graph_dtypes(graph: OpGraph) -> list[str]:
    """The floating-point dtypes of the graph's inputs and parameters (what the problem computes in)."""
    return sorted(
        {i.spec.dtype for i in graph.inputs if i.spec is not None and i.spec.dtype.startswith(("float", "bfloat"))}
    )


def summarize(records: list[dict[str, Any]], speed_measured: bool) -> dict[str, dict[str, Any]]:
    """Per category (and "all"): verified share, fast_1 against eager and torch.compile, geometric-mean
    speedups over verified problems, and how close kernels come to the ceilings."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(record["category"], []).append(record)
    ordered = sorted(groups, key=category_rank)
    summary = {name: summarize_group(groups[name], speed_measured) for name in ordered}
    summary["all"] = summarize_group(records, speed_measured)
    return summary


def category_rank(category: str) -> tuple[int, str]:
    """Single-op problems first, then fusion, then any other category by name."""
    return ({"single_op": 0, "fusion": 1}.get(category, 2), category)


def slower_than_eager(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records verified but timed slower than eager: `drtriton optimize` does not write their kernels back, so the
    user's code keeps PyTorch there."""
    return [record for record in records if record["status"] == "verified" and record["timing"]
            and not worth_writing_back(record)]


def summarize_group(records: list[dict[str, Any]], speed_measured: bool) -> dict[str, Any]:
    verified = [r for r in records if r["status"] == "verified"]
    timed = [r for r in verified if r["timing"]]
    vs_eager = [r["timing"]["speedup_vs_eager"] for r in timed]
    vs_compile = [r["timing"]["speedup_vs_compile"] for r in timed if r["timing"]["speedup_vs_compile"]]
    vs_tuned = [r["timing"].get("speedup_vs_compile_max_autotune") for r in timed]
    vs_tuned = [speedup for speedup in vs_tuned if speedup]
    latencies = [r["timing"]["latency"] for r in timed if r["timing"].get("latency")]
    group: dict[str, Any] = {
        "problems": len(records),
        "verified": len(verified),
        "timed": len(timed),
        "pytorch_kept": len(slower_than_eager(timed)),
        "fast_1_vs_eager": None,
        "fast_1_vs_compile": None,
        "geomean_speedup_vs_eager": geometric_mean(vs_eager),
        "geomean_speedup_vs_compile": geometric_mean(vs_compile),
        # torch.compile in mode max-autotune, timed only when asked for (None otherwise)
        "fast_1_vs_compile_max_autotune": None,
        "geomean_speedup_vs_compile_max_autotune": geometric_mean(vs_tuned),
        # the same calls, each issued to an idle GPU (host launch cost included); None for runs before it was measured
        "geomean_latency_speedup_vs_eager": geometric_mean([latency["speedup_vs_eager"] for latency in latencies]),
        "geomean_latency_speedup_vs_compile": geometric_mean(
            [latency["speedup_vs_compile"] for latency in latencies if latency["speedup_vs_compile"]]
        ),
    }
    if speed_measured and records:
        # KernelBench's fast_p at p = 1: correct and faster, over every problem (failures count as not fast)
        group["fast_1_vs_eager"] = sum(speedup > 1.0 for speedup in vs_eager) / len(records)
        group["fast_1_vs_compile"] = sum(speedup > 1.0 for speedup in vs_compile) / len(records)
        if vs_tuned:
            group["fast_1_vs_compile_max_autotune"] = sum(speedup > 1.0 for speedup in vs_tuned) / len(records)
    positions = [r["roofline"] for r in timed if r["roofline"]]
    group["memory_bound"] = ceiling_share(
        [p["bandwidth_fraction"] for p in positions if p["ceiling"] == "copy"], BANDWIDTH_TARGET
    )
    group["matmul_class"] = ceiling_share(
        [p["flop_fraction"] for p in positions if p["ceiling"] == "library"], LIBRARY_TARGET
    )
    return group


def ceiling_share(fractions: list[float | None], target: float) -> dict[str, Any]:
    """How many problems have a measured fraction of their ceiling, its median, and how many reach `target`."""
    known = [fraction for fraction in fractions if fraction is not None]
    return {
        "problems": len(known),
        "median_fraction": statistics.median(known) if known else None,
        "at_target": sum(fraction >= target for fraction in known),
        "target": target,
    }


def geometric_mean(values: list[float]) -> float | None:
    positive = [value for value in values if value and value > 0]
    if not positive:
        return None
    return math.exp(statistics.fmean(math.log(value) for value in positive))


def snake_case_name(name: str) -> str:
    """"CaptureError" -> "capture_error"."""
    return "".join(f"_{c.lower()}" if c.isupper() and i else c.lower() for i, c in enumerate(name))


class Places(Protocol):
    """Where a bench's problems run (bench/placement.py: this host's GPUs; bench/cluster.py: a Ray cluster's)."""

    concurrency: int  # problems run at once

    def describe(self) -> dict[str, Any]: ...

    def solve(
        self,
        problem: Problem,
        options: OptimizeOptions,
        copy_ceiling: dict[str, Any] | None,
        progress: Progress,
        cancel: threading.Event,
    ) -> dict[str, Any]: ...


def run_suite(
    problems: list[Problem],
    results: dict[str, Any],
    options: OptimizeOptions,
    copy_ceiling: dict[str, Any] | None,
    *,
    save: Callable[[dict[str, Any]], None],
    on_progress: Callable[[int, int, Problem, str], None],
    on_done: Callable[[int, int, dict[str, Any]], None],
    places: Places,
) -> bool:
    """Run every problem not yet in `results`, `places.concurrency` at a time, saving after each; False when
    interrupted (Ctrl-C).

    Problems run side by side on one GPU share it through a lock their workers take: verifications together,
    each timing alone (worker/gpu_lock.py), and each job that holds its task's tensors there waits until they fit
    (engine/gpu_memory.py). An interrupted problem leaves no record, so a later run with the same results picks it up.
    """
    recorded = {record["problem"] for record in results["problems"]}
    pending = [problem for problem in problems if problem.name not in recorded]
    speed_measured = results["device"]["kind"] == "cuda"
    results["complete"] = False
    results["placement"] = places.describe()
    results["summary"] = summarize(results["problems"], speed_measured)
    stop = threading.Event()
    finished = 0

    def run(number: int, problem: Problem) -> dict[str, Any]:
        def progress(message: str) -> None:
            on_progress(number, len(pending), problem, message)

        return places.solve(problem, options, copy_ceiling, progress, stop)

    with concurrent.futures.ThreadPoolExecutor(max_workers=max(places.concurrency, 1)) as pool:
        futures = [pool.submit(run, number, problem) for number, problem in enumerate(pending, start=1)]
        try:
            for future in concurrent.futures.as_completed(futures):
                record = future.result()
                results["problems"].append(record)
                results["summary"] = summarize(results["problems"], speed_measured)
                results["updated"] = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
                save(results)
                finished += 1
                on_done(finished, len(pending), record)
        except KeyboardInterrupt:
            stop.set()  # the running problems' workers are killed; their results are not recorded
            for future in futures:
                future.cancel()
            save(results)
            return False
    results["summary"] = summarize(results["problems"], speed_measured)
    results["complete"] = True
    save(results)
    return True


def git_commit(directory: Path) -> str:
    """$DRTRITON_COMMIT if set (a copy without .git), else the commit of the repository holding `directory`."""
    if os.environ.get("DRTRITON_COMMIT"):
        return os.environ["DRTRITON_COMMIT"]

    def git(*command: str) -> str | None:
        try:
            done = subprocess.run(["git", *command], capture_output=True, text=True, cwd=directory, check=True)
        except (OSError, subprocess.CalledProcessError):
            return None
        return done.stdout.strip()

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return "unknown (not a git checkout; set DRTRITON_COMMIT)"
    changed = git("status", "--porcelain", "--untracked-files=no")
    return commit + (f" plus uncommitted changes to {len(changed.splitlines())} files" if changed else "")


def load_results(path: Path, device: dict[str, str], pipeline: dict[str, Any]) -> dict[str, Any]:
    """Earlier results to resume, refused when they were measured on another device or pipeline setting."""
    try:
        results = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise DrtritonError(f"cannot resume from {path}: {error}", "run without --resume to start afresh") from None
    if results.get("schema") != RESULTS_SCHEMA:
        raise DrtritonError(f"{path} is not a drtriton bench result ({RESULTS_SCHEMA})", "choose another --out")
    if results["device"] != device:
        earlier = results["device"]
        raise DrtritonError(
            f"{path} was measured on {earlier['kind']} ({earlier['name']}), not {device['kind']} ({device['name']})",
            "resume on the same device, or choose another --out",
        )
    if results["pipeline"] != pipeline:
        raise DrtritonError(
            f"{path} was run with {results['pipeline']}, not {pipeline}",
            "resume with the same --trials, --search and --search-seconds, or choose another --out",
        )
    return results


def new_results(
    *,
    command: str,
    commit: str,
    suite: str,
    device: dict[str, str],
    versions: dict[str, str],
    pipeline: dict[str, Any],
) -> dict[str, Any]:
    """The results document before any problem has run; `pipeline`: trials, search, search_seconds."""
    now = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    return {
        "schema": RESULTS_SCHEMA,
        "command": command,
        "commit": commit,
        "suite": suite,
        "device": device,
        "versions": versions,
        "pipeline": pipeline,
        "started": now,
        "updated": now,
        "complete": False,
        "copy_bandwidth": [],
        "skipped_files": [],
        "summary": {},
        "problems": [],
    }
