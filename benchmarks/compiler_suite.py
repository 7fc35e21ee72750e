"""The embedded compiler's synthetic suite: generate it from a seed, check it regenerates, run the compiler on it.

`generate [--check]` writes (or regenerates and diffs) CSP-DAG programs as KernelBench-form files plus
index.json; `run --device cpu|cuda` records per problem the verdict, ops in Triton and kept, and time.
"""

from __future__ import annotations

import argparse
import datetime
import difflib
import functools
import hashlib
import json
import math
import random
import shlex
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from collections import Counter
from concurrent.futures import Future, ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import psutil
import torch

from drtriton_lsp.engine.memory_caps import FLOOR_BYTES
from drtriton_lsp.engine.pipeline import OptimizeOptions, optimize_target
from drtriton_lsp.engine.session import Cancelled, WorkerSession
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.local import LocalRunner
from drtriton_lsp.worker.devices import describe_devices

REPO = Path(__file__).resolve().parent.parent
SUITE_DIR = REPO / "benchmarks" / "suites" / "synthetic"
RESULTS_DIR = REPO / "benchmarks" / "results"
INDEX_NAME = "index.json"
INDEX_SCHEMA = "drtriton.compiler-suite/1"
RESULTS_SCHEMA = "drtriton.compiler-suite-results/1"
PROBLEM_GLOB = "p[0-9][0-9][0-9]_*.py"
DEFAULT_SEED = 2026
DEFAULT_COUNT = 100
DEFAULT_DTYPE_SHARES = (("float32", 0.6), ("float16", 0.2), ("bfloat16", 0.2))
# Convolutions may stay PyTorch calls by design (issue #3), so the suite leaves them out.
DEFAULT_EXCLUDED_FAMILIES = ("conv",)
# Seeds tried per problem before giving up: infeasible draws, duplicates, even sizes, overflow.
MAX_DRAWS_PER_PROBLEM = 64
# Share of a program's sizes above 1 that must not be powers of two (sizes that test the masks).
MIN_SHARE_NOT_POWER_OF_TWO = 0.5
# Ops that return views of their inputs although their schema has no alias annotation:
# broadcast_tensors (`Tensor[] -> Tensor[]`, expanded inputs; what l1_loss and huber_loss call).
VIEWS_WITHOUT_ALIAS_SCHEMA = ("aten.broadcast_tensors.default",)


@dataclass(frozen=True)
class SuiteSpec:
    """Everything that determines a suite: the same spec always generates the same bytes."""

    seed: int = DEFAULT_SEED
    count: int = DEFAULT_COUNT
    min_ops: int = 1
    max_ops: int = 6
    dtype_shares: tuple[tuple[str, float], ...] = DEFAULT_DTYPE_SHARES
    exclude_families: tuple[str, ...] = DEFAULT_EXCLUDED_FAMILIES
    # synthesis caps grow by 2**size_scale elements per tensor (0: CPU-sized, the default; 8: GPU-sized)
    size_scale: int = 0

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["dtype_shares"] = dict(self.dtype_shares)
        data["exclude_families"] = list(self.exclude_families)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "SuiteSpec":
        return cls(
            seed=data["seed"],
            count=data["count"],
            min_ops=data["min_ops"],
            max_ops=data["max_ops"],
            dtype_shares=tuple(data["dtype_shares"].items()),
            exclude_families=tuple(data["exclude_families"]),
            size_scale=data.get("size_scale", 0),
        )


# ---------------------------------------------------------------------------------------------
# generate / check


def plan_problems(spec: SuiteSpec) -> list[tuple[int, str]]:
    """(op count, dtype) per problem: op counts spread evenly over the range, dtypes by share."""
    levels = [spec.min_ops + index % (spec.max_ops - spec.min_ops + 1) for index in range(spec.count)]
    dtypes = [dtype for dtype, number in apportion(spec.count, spec.dtype_shares) for _ in range(number)]
    rng = random.Random(spec.seed)
    rng.shuffle(levels)
    rng.shuffle(dtypes)
    return list(zip(levels, dtypes))


def apportion(count: int, shares: tuple[tuple[str, float], ...]) -> list[tuple[str, int]]:
    """Split `count` by `shares` (largest remainder), so 100 at 60/20/20 is exactly 60, 20, 20."""
    total = sum(share for _, share in shares)
    exact = [(name, count * share / total) for name, share in shares]
    numbers = {name: math.floor(value) for name, value in exact}
    by_remainder = sorted(exact, key=lambda item: (item[1] - math.floor(item[1])), reverse=True)
    for name, _ in by_remainder[: count - sum(numbers.values())]:
        numbers[name] += 1
    return [(name, numbers[name]) for name, _ in shares]


def draw_seed(suite_seed: int, problem: int, draw: int) -> int:
    """The synthesis seed of draw `draw` for problem `problem`: stable across Python versions."""
    digest = hashlib.sha256(f"compiler-suite:{suite_seed}:{problem}:{draw}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def generate_suite(spec: SuiteSpec) -> tuple[dict[str, str], dict[str, Any]]:
    """The suite's files (name -> source) and its index; deterministic for a given spec."""
    # Imported here so that `run` works where only the product is installed (e.g. the GPU machine).
    from drtriton_training.csp_dag import ProgramSynthesizer

    from drtriton_training.shapes import SynthesisLimits

    base = SynthesisLimits()
    limits = SynthesisLimits(
        max_tensor_elements=base.max_tensor_elements << spec.size_scale,
        max_total_elements=base.max_total_elements << spec.size_scale,
        max_flops=base.max_flops << (2 * spec.size_scale),
        solver_time=base.solver_time,
    )
    synthesizers = {
        dtype: ProgramSynthesizer(limits=limits, dtype=dtype, exclude_families=spec.exclude_families)
        for dtype, _ in spec.dtype_shares
    }
    files: dict[str, str] = {}
    problems = []
    seen: set[str] = set()
    for number, (level, dtype) in enumerate(plan_problems(spec)):
        program, source, metadata = draw_problem(synthesizers[dtype], level, spec.seed, number, seen)
        seen.add(metadata["hash"])
        name = f"p{number:03d}_{'_'.join(metadata['ops'])}.py"
        files[name] = source
        problems.append(
            {
                "file": name,
                "sha256": hashlib.sha256(source.encode()).hexdigest(),
                "program_hash": metadata["hash"],
                "seed": program.seed,
                "dtype": dtype,
                "ops": metadata["ops"],
                "families": metadata["families"],
                "input_shapes": metadata["input_shapes"],
                "output_shapes": metadata["output_shapes"],
            }
        )
    index = {"schema": INDEX_SCHEMA, "generator": spec.to_json(), "problems": problems}
    return files, index


def draw_problem(synthesizer, level: int, suite_seed: int, number: int, seen: set[str]):
    """The first draw that is feasible, new, has odd sizes and a finite reference result."""
    from drtriton_training.csp_dag import SynthesisError
    from drtriton_training.emit import program_metadata, render_program

    for draw in range(MAX_DRAWS_PER_PROBLEM):
        try:
            program = synthesizer.synthesize(level, draw_seed(suite_seed, number, draw))
        except SynthesisError:
            continue
        metadata = program_metadata(program, synthesizer.registry)
        if metadata["hash"] in seen or not has_odd_sizes(metadata["input_shapes"], metadata["op_shapes"]):
            continue
        source = render_program(program, synthesizer.registry)
        if reference_is_finite(source):
            return program, source, metadata
    raise RuntimeError(f"problem {number}: no usable program in {MAX_DRAWS_PER_PROBLEM} draws (level {level})")


def has_odd_sizes(input_shapes: list[list[int]], op_shapes: list[list[int]]) -> bool:
    """Some input size is odd (above 1), and at least half of all sizes above 1 are not powers of two.

    Power-of-two sizes hide missing masks, since Triton blocks are powers of two too.
    """
    if not any(size > 1 and size % 2 for shape in input_shapes for size in shape):
        return False
    sizes = [size for shape in input_shapes + op_shapes for size in shape if size > 1]
    not_powers = [size for size in sizes if size & (size - 1)]
    return len(not_powers) >= MIN_SHARE_NOT_POWER_OF_TWO * len(sizes)


def reference_is_finite(source: str) -> bool:
    """Whether eager PyTorch gives finite outputs on the program's own inputs (seed 0).

    A half-precision chain can overflow (square of exp, ...); such a problem says nothing about a kernel.
    """
    namespace: dict[str, Any] = {}
    exec(compile(source, "<suite problem>", "exec"), namespace)
    torch.manual_seed(0)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        model = namespace["Model"](*namespace["get_init_inputs"]())
        result = model(*namespace["get_inputs"]())
    outputs = result if isinstance(result, tuple) else (result,)
    return all(bool(torch.isfinite(output).all()) for output in outputs)


def write_suite(files: dict[str, str], index: dict[str, Any], directory: Path) -> None:
    """Write the problem files and index.json, removing problem files of an earlier suite."""
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob(PROBLEM_GLOB):
        stale.unlink()
    for name, source in files.items():
        (directory / name).write_text(source)
    (directory / INDEX_NAME).write_text(json.dumps(index, indent=1) + "\n")


def check_suite(directory: Path) -> list[str]:
    """Regenerate the suite from its index's spec into a temporary directory; the differences found."""
    index = json.loads((directory / INDEX_NAME).read_text())
    files, fresh_index = generate_suite(SuiteSpec.from_json(index["generator"]))
    with tempfile.TemporaryDirectory() as scratch:
        fresh = Path(scratch)
        write_suite(files, fresh_index, fresh)
        return diff_directories(directory, fresh)


def diff_directories(committed: Path, fresh: Path) -> list[str]:
    """Missing, extra and differing suite files (with the start of a unified diff)."""
    names = {path.name for path in committed.glob(PROBLEM_GLOB)} | {INDEX_NAME}
    fresh_names = {path.name for path in fresh.glob(PROBLEM_GLOB)} | {INDEX_NAME}
    problems = [f"missing (the generator writes it): {name}" for name in sorted(fresh_names - names)]
    problems += [f"extra (the generator does not write it): {name}" for name in sorted(names - fresh_names)]
    for name in sorted(names & fresh_names):
        old, new = (committed / name).read_bytes(), (fresh / name).read_bytes()
        if old != new:
            diff = difflib.unified_diff(
                old.decode().splitlines(), new.decode().splitlines(),
                f"committed/{name}", f"regenerated/{name}", lineterm="",
            )
            problems.append(f"differs: {name}\n" + "\n".join(list(diff)[:20]))
    return problems


# ---------------------------------------------------------------------------------------------
# run


def run_problem(path: Path, entry: dict[str, Any], options: OptimizeOptions, cancel: threading.Event) -> dict[str, Any]:
    """Optimize one problem's Model and record the verdict, the ops in Triton and kept, and the time."""
    started = time.monotonic()
    record: dict[str, Any] = {
        "file": entry["file"],
        "dtype": entry["dtype"],
        "ops": entry["ops"],
        "replaced_ops": [],
        "kept_ops": [],
        "device": None,
    }
    try:
        with LocalRunner() as runner:  # closed: no worker started ahead outlives its problem
            session = WorkerSession.for_file(runner, str(path), cancel=cancel)
            outcome = optimize_target(path.read_text(), str(path), "Model", options=options, session=session)
    except Cancelled:
        raise
    except DrtritonError as error:
        record.update(status="error", reason=type(error).__name__, message=error.located(), detail=error.hint[-2000:])
    except Exception as error:  # noqa: BLE001 - a drtriton bug: record it and go on with the suite
        record.update(status="error", reason="internal_error", message=f"{type(error).__name__}: {error}")
    else:
        report = outcome.report
        correctness = report["correctness"] or {}
        record.update(
            status=report["status"],
            reason=None if outcome.verified else correctness.get("reason") or report["status"],
            message=report["message"],
            replaced_ops=report["replaced_ops"],
            kept_ops=report["kept_ops"],
            device=report["device"],
            interpreter=correctness.get("interpreter"),
        )
    record["seconds"] = round(time.monotonic() - started, 2)
    return record


@functools.lru_cache(maxsize=None)
def is_view(op: str) -> bool:
    """Whether an ATen overload ("aten.view.default") returns an alias of an input: no compute.

    Read from the op's schema (a `Tensor(a)` result that is not written to), plus the few
    ops whose schema does not say so.
    """
    if op in VIEWS_WITHOUT_ALIAS_SCHEMA:
        return True
    namespace, _, rest = op.partition(".")
    name, _, overload = rest.partition(".")
    try:
        schema = getattr(getattr(getattr(torch.ops, namespace), name), overload or "default")._schema
    except (AttributeError, RuntimeError):
        return False
    return any(result.alias_info is not None and not result.alias_info.is_write for result in schema.returns)


def is_convolution(op: str) -> bool:
    """"aten.convolution.default", "aten.conv2d.default", "aten._convolution.default", ..."""
    name = op.split(".")[1] if op.count(".") == 2 else op
    return name.lstrip("_").startswith("conv")


def counted(ops: list[str]) -> list[str]:
    """The compute ops the Triton share counts: views and convolutions left out."""
    return [op for op in ops if not is_view(op) and not is_convolution(op)]


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Verified share, Triton share of compute ops, failures by reason, kept ops by frequency, time."""
    verified = [record for record in records if record["status"] == "verified"]
    in_triton = sum(len(counted(record["replaced_ops"])) for record in records)
    kept = Counter(op for record in records for op in counted(record["kept_ops"]))
    in_triton_verified = sum(len(counted(record["replaced_ops"])) for record in verified)
    compute_ops = in_triton + sum(kept.values())
    seconds = [record["seconds"] for record in records]
    reasons = Counter(record["reason"] for record in records if record["status"] != "verified")
    return {
        "problems": len(records),
        "verified": len(verified),
        "verified_percent": percent(len(verified), len(records)),
        "compute_ops": compute_ops,
        "compute_ops_in_triton": in_triton,
        "triton_op_percent": percent(in_triton, compute_ops),
        "compute_ops_in_triton_verified": in_triton_verified,
        "triton_op_percent_verified": percent(in_triton_verified, compute_ops),
        "failures_by_reason": dict(reasons.most_common()),
        "kept_ops_by_frequency": dict(kept.most_common()),
        "by_dtype": share_by(records, lambda record: record["dtype"]),
        "by_op_count": share_by(records, lambda record: str(len(record["ops"]))),
        "seconds_total": round(sum(seconds), 1),
        "seconds_per_problem_mean": round(statistics.fmean(seconds), 1) if seconds else None,
        "seconds_per_problem_median": round(statistics.median(seconds), 1) if seconds else None,
        "seconds_per_problem_max": max(seconds, default=None),
    }


def share_by(records: list[dict[str, Any]], key: Callable[[dict[str, Any]], str]) -> dict[str, str]:
    """"verified/total" per group of records."""
    groups: dict[str, list[dict[str, Any]]] = {}
    for record in records:
        groups.setdefault(key(record), []).append(record)
    return {
        group: f"{sum(r['status'] == 'verified' for r in members)}/{len(members)}"
        for group, members in sorted(groups.items())
    }


def percent(part: int, whole: int) -> float | None:
    return round(100.0 * part / whole, 1) if whole else None


def affordable_jobs(requested: int, per_job_bytes: int) -> int:
    """At most as many parallel problems as available memory holds at `per_job_bytes` each."""
    return max(1, min(requested, psutil.virtual_memory().available // per_job_bytes))


def run_suite(args: argparse.Namespace, argv: list[str]) -> int:
    index = json.loads((args.suite / INDEX_NAME).read_text())
    entries = index["problems"][: args.limit]
    # the suite measures correctness and coverage; several problems share the GPU, so nothing is timed
    # here (speed is `drtriton bench`'s job, one problem at a time)
    options = OptimizeOptions(device=args.device, trials=args.trials, benchmark=False)
    # each job's cap follows its task's size (engine/memory_caps.py); the suite's small problems stay at the floor
    jobs = affordable_jobs(args.jobs, FLOOR_BYTES)
    if jobs < args.jobs:
        print(f"running {jobs} at a time, not {args.jobs}: each may use {FLOOR_BYTES / 1024**3:.0f} GiB "
              "and less is available", flush=True)
    print(f"{len(entries)} problems from {relative(args.suite)} on device {args.device}, {jobs} at a time", flush=True)
    cancel = threading.Event()
    started = time.monotonic()
    interrupted = False
    executor = ThreadPoolExecutor(max_workers=jobs)
    futures: list[Future] = [
        executor.submit(run_problem, args.suite / entry["file"], entry, options, cancel) for entry in entries
    ]
    try:
        for done, future in enumerate(as_completed(futures), start=1):
            if future.exception() is None:
                print(progress_line(done, len(entries), future.result()), flush=True)
    except KeyboardInterrupt:
        interrupted = True
        cancel.set()
        print("\ninterrupted: stopping the workers and writing the results so far", flush=True)
    finally:
        executor.shutdown(wait=True, cancel_futures=True)
    records = [f.result() for f in futures if f.done() and not f.cancelled() and f.exception() is None]
    results = {
        "schema": RESULTS_SCHEMA,
        "command": shlex.join(["python", "benchmarks/compiler_suite.py", *argv]),
        "commit": git_output("rev-parse", "HEAD"),
        "uncommitted_changes": git_output("status", "--porcelain", "--untracked-files=no").splitlines(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "device": next((record["device"] for record in records if record["device"]), {"kind": args.device}),
        "versions": describe_devices()["versions"],
        "suite": {"directory": relative(args.suite), "generator": index["generator"], "size": len(index["problems"])},
        "complete": not interrupted and len(records) == len(entries),
        "wall_seconds": round(time.monotonic() - started, 1),
        "jobs": jobs,
        "summary": summarize(records),
        "problems": records,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    stem = args.out / f"compiler-suite-{args.name or args.device}"
    stem.with_suffix(".json").write_text(json.dumps(results, indent=1) + "\n")
    stem.with_suffix(".md").write_text(render_markdown(results))
    print(render_summary(results["summary"]))
    print(f"wrote {relative(stem.with_suffix('.md'))} and .json")
    return 130 if interrupted else 0


def progress_line(done: int, total: int, record: dict[str, Any]) -> str:
    triton, kept = len(counted(record["replaced_ops"])), len(counted(record["kept_ops"]))
    verdict = record["status"]
    if record["reason"] and record["reason"] != record["status"]:
        verdict += f" ({record['reason']})"
    return (
        f"[{done:3d}/{total}] {record['file'][:56]:<56} {verdict:<32} "
        f"Triton {triton}/{triton + kept} ops  {record['seconds']:6.1f} s"
    )


def render_summary(summary: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"verified: {summary['verified']}/{summary['problems']} ({summary['verified_percent']}%)",
            f"compute ops in Triton: {summary['compute_ops_in_triton']}/{summary['compute_ops']} "
            f"({summary['triton_op_percent']}%; {summary['triton_op_percent_verified']}% in verified problems)",
            f"time per problem: mean {summary['seconds_per_problem_mean']} s, "
            f"median {summary['seconds_per_problem_median']} s",
        ]
    )


def render_markdown(results: dict[str, Any]) -> str:
    summary = results["summary"]
    versions = results["versions"]
    device = results["device"]
    generator = results["suite"]["generator"]
    shares = ", ".join(f"{dtype} {share:g}" for dtype, share in generator["dtype_shares"].items())
    changed = results["uncommitted_changes"]
    lines = [
        f"# drtriton compiler suite: {device.get('name', device.get('kind'))}",
        "",
        f"- command: `{results['command']}`",
        f"- commit: {results['commit']}" + (f" plus uncommitted changes to {len(changed)} files" if changed else ""),
        f"- device: {device.get('kind')} ({device.get('name', '-')})",
        f"- versions: python {versions['python']}, torch {versions['torch']}, triton {versions['triton']}, "
        f"CUDA {versions['cuda']}",
        f"- date: {results['date']}",
        f"- suite: {results['suite']['directory']} ({results['suite']['size']} problems, seed {generator['seed']}, "
        f"{generator['min_ops']}-{generator['max_ops']} ops, {shares}, "
        f"families except {', '.join(generator['exclude_families'])})",
        f"- ran: {summary['problems']} problems, {results['jobs']} at a time, {results['wall_seconds']} s"
        + ("" if results["complete"] else " (partial: interrupted or limited)"),
        "",
        "## Summary",
        "",
        f"- verified: {summary['verified']}/{summary['problems']} ({summary['verified_percent']}%)",
        f"- compute ops in Triton: {summary['compute_ops_in_triton']} of {summary['compute_ops']} "
        f"({summary['triton_op_percent']}%); counting only verified problems: "
        f"{summary['compute_ops_in_triton_verified']} ({summary['triton_op_percent_verified']}%). "
        "Views (ops that return an alias of an input) and convolutions are not counted, nor are the ops "
        "of problems that ended in an error (they have no report).",
        f"- verified by dtype: {format_shares(summary['by_dtype'])}",
        f"- verified by op count: {format_shares(summary['by_op_count'])}",
        f"- time per problem: mean {summary['seconds_per_problem_mean']} s, "
        f"median {summary['seconds_per_problem_median']} s, "
        f"max {summary['seconds_per_problem_max']} s",
        "",
        "## Not verified, by reason",
        "",
        *(f"- {reason}: {count}" for reason, count in summary["failures_by_reason"].items()),
        "",
        "## Compute ops kept in PyTorch, by frequency",
        "",
        "| op | times kept |",
        "|---|---|",
        *(f"| {op} | {count} |" for op, count in summary["kept_ops_by_frequency"].items()),
        "",
        "## Problems",
        "",
        "| problem | dtype | status | reason | Triton ops | kept ops | seconds |",
        "|---|---|---|---|---|---|---|",
    ]
    for record in results["problems"]:
        triton, kept = counted(record["replaced_ops"]), counted(record["kept_ops"])
        lines.append(
            f"| {record['file']} | {record['dtype']} | {record['status']} | {record['reason'] or ''} | "
            f"{len(triton)} | {', '.join(short_op(op) for op in kept)} | {record['seconds']} |"
        )
    failures = [record for record in results["problems"] if record["status"] != "verified"]
    if failures:
        lines += ["", "## Messages of problems not verified", ""]
        lines += [f"- {record['file']}: {one_line(record['message'])}" for record in failures]
    return "\n".join(lines) + "\n"


def format_shares(shares: dict[str, str]) -> str:
    return ", ".join(f"{group} {share}" for group, share in shares.items())


def short_op(op: str) -> str:
    """"aten.sum.dim_IntList" -> "sum.dim_IntList"."""
    return op.removeprefix("aten.")


def one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


def git_output(*command: str) -> str:
    try:
        return subprocess.run(["git", *command], capture_output=True, text=True, cwd=REPO, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def relative(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(REPO))
    except ValueError:
        return str(path)


# ---------------------------------------------------------------------------------------------
# command line


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    generate = commands.add_parser("generate", help="write the suite (or, with --check, verify it regenerates)")
    generate.add_argument("--seed", type=int, default=DEFAULT_SEED)
    generate.add_argument("--count", type=int, default=DEFAULT_COUNT, help="problems (default 100)")
    generate.add_argument("--out", type=Path, default=SUITE_DIR, help="suite directory")
    generate.add_argument(
        "--size-scale",
        type=int,
        default=0,
        help="grow the synthesis caps by 2**N elements per tensor (0: CPU-sized; 8: GPU-sized, up to 16M elements)",
    )
    generate.add_argument(
        "--check", action="store_true", help="regenerate into a temporary directory and diff with --out"
    )
    run = commands.add_parser("run", help="run the compiler's pipeline on every problem and write results")
    run.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    run.add_argument("--jobs", type=int, default=1, help="problems at a time (capped by available memory)")
    run.add_argument("--limit", type=int, help="run only the first N problems")
    run.add_argument("--trials", type=int, default=5, help="verification trials per problem (default 5)")
    run.add_argument("--suite", type=Path, default=SUITE_DIR, help="suite directory")
    run.add_argument("--out", type=Path, default=RESULTS_DIR, help="results directory")
    run.add_argument("--name", help="results are written as compiler-suite-NAME.md/.json (default: the device)")
    args = parser.parse_args(argv)

    suite_directory = args.suite if args.command == "run" else args.out
    if (args.command == "run" or args.check) and not (suite_directory / INDEX_NAME).exists():
        parser.error(f"no {INDEX_NAME} in {suite_directory}: write the suite first with `generate`")
    if args.command == "run":
        if args.jobs < 1 or (args.limit is not None and args.limit < 1):
            parser.error("--jobs and --limit must be at least 1")
        return run_suite(args, argv)
    if args.check:
        differences = check_suite(args.out)
        for difference in differences:
            print(difference)
        verdict = f"{len(differences)} differences" if differences else "regenerates byte for byte"
        print(f"{relative(args.out)}: {verdict}")
        return 1 if differences else 0
    if args.count < 1:
        parser.error("--count must be at least 1")
    files, index = generate_suite(SuiteSpec(seed=args.seed, count=args.count, size_scale=args.size_scale))
    write_suite(files, index, args.out)
    print(f"wrote {len(files)} problems and {INDEX_NAME} to {relative(args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
