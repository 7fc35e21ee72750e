"""`drtriton-train compare`: the product's search with the compiler alone against the compiler plus a trained model,
on the held-out synthetic programs, at the same time per program (two `drtriton bench` runs, one comparison).

The model arm runs first; the compiler arm's search budget is then raised by the model's mean time per program.
"""

from __future__ import annotations

import json
import math
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from drtriton_lsp.errors import DrtritonError

from drtriton_training.programs import load_heldout
from drtriton_training.evaluate import checkpoint_hash, geometric_mean, provenance, table_cell

RESULTS_SCHEMA = "drtriton.train-compare/1"
COMPILER_ARM = "compiler"
MODEL_ARM = "compiler+model"


@dataclass
class CompareOptions:
    """levels / per_level: the first `per_level` held-out programs of each level; search_seconds: the compiler
    search's budget per program in the model arm; samples / turns: the model's answers per program and refinement
    turns; kind: what the model writes ("script" or "kernel"); jobs: problems at a time (`drtriton bench --jobs`)."""

    levels: tuple[int, ...]
    per_level: int
    device: str = "cuda"
    search_seconds: float = 10.0
    samples: int = 4
    turns: int = 1
    kind: str = "script"
    jobs: int = 1
    trials: int = 5


def write_programs(levels: tuple[int, ...], per_level: int, directory: Path) -> list[Path]:
    """The held-out programs as KernelBench-form files, `level_LL/program_NNN.py`, for `drtriton bench`."""
    paths = []
    for level in levels:
        folder = directory / f"level_{level:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        for index, program in enumerate(load_heldout(level)[:per_level]):
            path = folder / f"program_{index:03d}.py"
            path.write_text(program.source)
            paths.append(path)
    return paths


def bench_command(
    programs: Path, out: Path, options: CompareOptions, search_seconds: float, model: Path | None
) -> list[str]:
    """The `drtriton bench` command of one arm: the compiler's search (on a GPU), and the model's answers if given.
    Each arm keeps its searches in its own fresh cache, so neither reuses the other's (or an earlier run's)."""
    command = [
        sys.executable, "-m", "drtriton_lsp.cli", "bench", str(programs), "--device", options.device,
        "--out", str(out), "--trials", str(options.trials), "--jobs", str(options.jobs),
    ]
    if options.device != "cpu":
        command += ["--search", "--search-seconds", f"{search_seconds:g}", "--search-cache", str(out / "search-cache")]
    if model is not None:
        command += [
            "--model", str(model), "--model-kind", options.kind, "--samples", str(options.samples),
            "--turns", str(options.turns),
        ]
    return command


def run_arm(command: list[str], out: Path, log: Callable[[str], None]) -> dict[str, Any]:
    """Run one arm's bench (its progress goes to our stderr) and return its results.json."""
    log(f"compare: {shlex.join(command)}")
    finished = subprocess.run(command, stdout=sys.stderr, check=False)
    results_path = out / "results.json"
    if finished.returncode != 0 or not results_path.is_file():
        written = "wrote" if results_path.is_file() else "wrote no"
        raise DrtritonError(
            f"`drtriton bench` exited with {finished.returncode} and {written} {results_path}",
            "its messages are above; run that command alone to see the first problem that fails",
        )
    return json.loads(results_path.read_text())


def model_seconds_per_problem(results: dict[str, Any]) -> float:
    """The model's mean time per problem in a bench run (its search section's `model.seconds`; 0 where absent)."""
    seconds = [
        ((problem.get("report") or {}).get("search") or {}).get("model", {}).get("seconds") or 0.0
        for problem in results["problems"]
    ]
    return sum(seconds) / len(seconds) if seconds else 0.0


def arm_summary(results: dict[str, Any]) -> dict[str, Any]:
    """One arm over all problems: verified, faster than torch.compile (a failure counts as not faster; None without a
    GPU), geometric mean of the speedups against torch.compile over the timed problems, wall seconds per problem,
    model winners."""
    problems = results["problems"]
    speedups = [_speedup(problem) for problem in problems]
    timed = [speedup for speedup in speedups if speedup is not None]
    winners = [_winner_source(problem) for problem in problems]
    faster = sum(speedup > 1.0 for speedup in timed) if results["device"]["kind"] == "cuda" else None
    return {
        "problems": len(problems),
        "verified": sum(problem["status"] == "verified" for problem in problems),
        "timed": len(timed),
        "faster_than_compile": faster,
        "share_faster_than_compile": faster / len(problems) if problems and faster is not None else None,
        "geomean_vs_compile": geometric_mean(timed),
        "seconds_per_problem": sum(problem["seconds"] for problem in problems) / len(problems) if problems else None,
        "model_winners": winners.count("model"),
    }


def compare(compiler: dict[str, Any], combined: dict[str, Any]) -> dict[str, Any]:
    """Both arms' summaries, and per problem each arm's speedup against torch.compile and the winner's source."""
    by_problem = {problem["problem"]: problem for problem in compiler["problems"]}
    rows = []
    for problem in combined["problems"]:
        other = by_problem.get(problem["problem"])
        rows.append({
            "problem": problem["problem"],
            COMPILER_ARM: _speedup(other) if other else None,
            MODEL_ARM: _speedup(problem),
            "winner": _winner_source(problem),
            "model_answers": _model_entry(problem).get("answers"),
            "model_verified": _model_entry(problem).get("verified"),
        })
    return {COMPILER_ARM: arm_summary(compiler), MODEL_ARM: arm_summary(combined), "problems": rows}


def run_compare(
    model: Path, options: CompareOptions, work: Path, log: Callable[[str], None] = print
) -> dict[str, Any]:
    """Write the programs, run the model arm, then the compiler arm at the same time per program; the comparison
    with what produced it."""
    programs = work / "programs"
    count = len(write_programs(options.levels, options.per_level, programs))
    log(f"compare: {count} held-out programs in {programs}")
    combined_out = work / MODEL_ARM
    combined = run_arm(bench_command(programs, combined_out, options, options.search_seconds, model), combined_out, log)
    extra = math.ceil(model_seconds_per_problem(combined))
    compiler_seconds = options.search_seconds + extra
    log(f"compare: the model took {extra} s per program; the compiler alone searches {compiler_seconds:g} s")
    compiler_out = work / COMPILER_ARM
    compiler = run_arm(bench_command(programs, compiler_out, options, compiler_seconds, None), compiler_out, log)
    return {
        "schema": RESULTS_SCHEMA,
        **provenance(options.device),
        "model": {"directory": str(model), "checkpoint_hash": checkpoint_hash(model)},
        "options": {
            "levels": list(options.levels), "per_level": options.per_level, "device": options.device,
            "kind": options.kind, "samples": options.samples, "turns": options.turns, "jobs": options.jobs,
            "trials": options.trials,
            "search_seconds": {MODEL_ARM: options.search_seconds, COMPILER_ARM: compiler_seconds},
        },
        "bench_commands": {
            MODEL_ARM: combined["command"], COMPILER_ARM: compiler["command"],
        },
        **compare(compiler, combined),
    }


def to_markdown(results: dict[str, Any]) -> str:
    """The comparison as two tables (the arms, then each problem) with what produced it."""
    options = results["options"]
    budgets = options["search_seconds"]
    lines = [
        f"# Compiler search alone against compiler + model ({options['kind']} writer), held-out programs",
        "",
        f"- command: `{results['command']}`",
        f"- commit: {results['commit']}",
        f"- model: {results['model']['directory']} (hash {results['model']['checkpoint_hash']})",
        f"- machine: {results['machine'].get('gpu') or results['machine']['platform']}, torch "
        f"{results['machine']['torch']}; device {options['device']}",
        f"- levels {', '.join(map(str, options['levels']))}, {options['per_level']} programs each; model: "
        f"{options['samples']} samples, {options['turns']} turns; compiler search budget per program: "
        + (
            f"{budgets[MODEL_ARM]:g} s with the model, {budgets[COMPILER_ARM]:g} s alone (the model's mean time added)"
            if options["device"] != "cpu" else "none (no search without a GPU: verification only, no speed)"
        ),
        f"- bench commands: `{results['bench_commands'][MODEL_ARM]}`; `{results['bench_commands'][COMPILER_ARM]}`",
        "",
        "| arm | problems | verified | faster than torch.compile | geomean vs torch.compile | s per problem "
        "| winners from the model |",
        "|---|---|---|---|---|---|---|",
    ]
    for arm in (COMPILER_ARM, MODEL_ARM):
        summary = results[arm]
        lines.append(
            f"| {arm} | {summary['problems']} | {summary['verified']} | {table_cell(summary['faster_than_compile'])} "
            f"({table_cell(summary['share_faster_than_compile'])}) | {table_cell(summary['geomean_vs_compile'])} "
            f"| {table_cell(summary['seconds_per_problem'])} | {summary['model_winners']} |"
        )
    lines += [
        "",
        "| problem | compiler alone vs compile | compiler + model vs compile | winner | model answers (verified) |",
        "|---|---|---|---|---|",
    ]
    for row in results["problems"]:
        lines.append(
            f"| {row['problem']} | {table_cell(row[COMPILER_ARM])} | {table_cell(row[MODEL_ARM])} | {row['winner']} "
            f"| {table_cell(row['model_answers'])} ({table_cell(row['model_verified'])}) |"
        )
    return "\n".join(lines) + "\n"


def _speedup(problem: dict[str, Any]) -> float | None:
    timing = problem.get("timing") if problem.get("status") == "verified" else None
    return (timing or {}).get("speedup_vs_compile")


def _model_entry(problem: dict[str, Any]) -> dict[str, Any]:
    return ((problem.get("report") or {}).get("search") or {}).get("model") or {}


def _winner_source(problem: dict[str, Any]) -> str | None:
    if problem.get("status") != "verified":
        return None
    search = (problem.get("report") or {}).get("search") or {}
    return (search.get("winner") or {}).get("source", "compiler")
