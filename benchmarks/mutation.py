"""Mutation testing of the modules that carry drtriton's promises: does a small bug in them fail a test?

Each module is mutated by cosmic-ray (constraints/mutation.txt) in a scratch copy of the working tree, one mutant at a
time, and the tests chosen for it below run against each mutant; results go to benchmarks/results/mutation/NAME.json
and, aggregated, to benchmarks/results/mutation.md. Run: `make mutation [MODULE=NAME]`, or
`python benchmarks/mutation.py run NAME ... [--minutes M] [--sample N]` and `python benchmarks/mutation.py report`.
`python benchmarks/mutation.py cases` puts back, one at a time, the bugs issue 22 found uncaught (CASES) and records
which tests fail (benchmarks/results/mutation_cases.json, a section of mutation.md).
"""

from __future__ import annotations

import argparse
import ast
import datetime
import json
import os
import random
import re
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RESULTS = REPO / "benchmarks" / "results" / "mutation"
SUMMARY = REPO / "benchmarks" / "results" / "mutation.md"
EQUIVALENTS = REPO / "benchmarks" / "mutation_equivalent.json"
SCRATCH = Path(os.environ.get("DRTRITON_MUTATION_SCRATCH", "/tmp/drtriton-mutation"))
TOOL = "cosmic-ray 8.7.0"

# One natural replacement per operator (as mutmut makes them), comparisons moved across their boundary and
# negated: cosmic-ray's default of every operator for every other makes 10x more mutants, most of them duplicates
# in what they test (a `+` turned into `<<` fails wherever `+` turned into `-` fails).
KEPT_BINARY = {"Add_Sub", "Sub_Add", "Mul_Div", "Div_Mul", "FloorDiv_Div", "Mod_FloorDiv", "Pow_Mul",
               "LShift_RShift", "RShift_LShift", "BitOr_BitAnd", "BitAnd_BitOr", "BitXor_BitOr"}
KEPT_COMPARISON = {"Eq_NotEq", "NotEq_Eq", "Lt_LtE", "Lt_GtE", "LtE_Lt", "LtE_Gt", "Gt_GtE", "Gt_LtE",
                   "GtE_Gt", "GtE_Lt", "Is_IsNot", "IsNot_Is"}
KEPT_UNARY = {"USub_UAdd", "Delete_USub", "Delete_Not"}


def excluded_operators() -> list[str]:
    """Regular expressions for cosmic-ray's operators-filter: every replacement outside the kept sets."""
    return [
        rf"core/Replace{kind}Operator_(?!({'|'.join(sorted(kept))})$)"
        for kind, kept in (("Binary", KEPT_BINARY), ("Comparison", KEPT_COMPARISON), ("Unary", KEPT_UNARY))
    ] + [r"core/Variable(Inserter|Replacer)"]


@dataclass(frozen=True)
class Target:
    """A module to mutate and the tests that must catch its mutants (the fastest that cover it).

    note: what these tests leave to other tests (a GPU-only path, worker-process tests left out for time).
    seconds: cosmic-ray's per-mutant limit (a mutant that hangs the tests counts as killed).
    left_out: functions not mutated here (the note says which tests cover them instead).
    embedded: the name of a string constant in `path` holding code that runs elsewhere (the dispatch helper each
      written block carries): that code is mutated, and put back into the constant before each test run.
    """

    path: str
    tests: tuple[str, ...]
    note: str = ""
    seconds: float = 120.0
    left_out: tuple[str, ...] = ()
    embedded: str | None = None


FAST_JUDGE_TESTS = (
    "tests/worker/test_float64_arbiter.py", "tests/worker/test_tolerances.py", "tests/worker/test_judge_helpers.py",
    "tests/worker/test_candidate_process.py",
)
# the judge with the candidate's side in the test's process: the verifier's fixtures in about 35 s
IN_PROCESS_JUDGE = "tests/worker/test_judge_in_process.py"
VERIFY_TESTS = ("tests/engine/test_verify.py", "-k", "not hanging and not memory_hog and not reference_itself")

TARGETS: dict[str, Target] = {
    "tolerances": Target(
        "drtriton_lsp/worker/tolerances.py",
        ("tests/worker/test_tolerances.py", "tests/worker/test_float64_arbiter.py", "tests/worker/test_op_audit.py"),
    ),
    "op_audit": Target(
        "drtriton_lsp/worker/op_audit.py", ("tests/worker/test_op_audit.py",),
        note="worker-process tests (tests/engine/test_verify.py, test_adversarial.py) left out for time",
    ),
    "candidate_policy": Target("drtriton_lsp/engine/candidate_policy.py", ("tests/engine/test_candidate_policy.py",),
                               note="the adversarial fixtures (tests/engine/test_adversarial.py) left out for time"),
    "judge": Target(
        "drtriton_lsp/worker/judge.py", (*FAST_JUDGE_TESTS, IN_PROCESS_JUDGE), seconds=300.0,
        note="the process boundary (CandidateProcess: crashes, hangs, forged messages) is left to test_verify.py and "
             "test_adversarial.py, which start two interpreters per verification",
    ),
    "candidate_host": Target(
        "drtriton_lsp/worker/candidate_host.py", ("tests/worker/test_candidate_host.py", IN_PROCESS_JUDGE),
        seconds=300.0,
        note="the process boundary is also exercised by test_verify.py and test_adversarial.py (left out for time)",
    ),
    "verify": Target("drtriton_lsp/engine/verify.py", VERIFY_TESTS, seconds=300.0,
                     note="each mutant starts verify workers: tests/engine/test_verify.py, about a minute"),
    "triton_launches": Target(
        "drtriton_lsp/worker/triton_launches.py", ("tests/worker/test_op_audit.py", IN_PROCESS_JUDGE), seconds=300.0,
    ),
    "bench": Target(
        "drtriton_lsp/worker/benchmark.py", ("tests/test_bench.py", "tests/worker/test_bench_timing.py", "-m", "not slow"),
        note="run_benchmark and run_candidate_timing need CUDA (left out: tests/engine/test_gpu.py covers them on the "
             "GPU machine); the timing loops run here on a simulated device",
        left_out=("run_benchmark", "run_candidate_timing"),
    ),
    "dispatch": Target(
        "drtriton_lsp/source/dispatch.py", ("tests/source/test_dispatch.py", "tests/source/test_write_back.py", "-m",
                                            "not slow"),
        note="the table's rendering and the policy's helper check; the helper itself is dispatch_helper",
    ),
    "dispatch_helper": Target(
        "drtriton_lsp/source/dispatch.py", ("tests/source/test_dispatch.py",), embedded="DISPATCH_HELPER",
        note="the guards every written block runs at each call (DISPATCH_HELPER, a text in dispatch.py)",
    ),
    "writeback": Target("drtriton_lsp/source/writeback.py", ("tests/source/test_write_back.py", "-m", "not slow")),
    "files": Target("drtriton_lsp/source/files.py", ("tests/source/test_files.py",)),
    "apply_kernel": Target(
        "drtriton_lsp/server/apply_kernel.py",
        ("tests/server/test_apply_edits.py", "tests/server/test_apply_refusals.py",
         "tests/server/test_job_failures.py::test_apply_refuses_after_an_edit_made_during_the_job_and_offers_to_rerun",
         "tests/server/test_apply_with_regression_test.py"),
        seconds=300.0,
        note="the plain success path (one versioned edit) is left to test_generate_job.py; each mutant here starts "
             "the language server and generate jobs",
    ),
    "csp_dag": Target(
        "training/drtriton_training/csp_dag.py",
        ("training/tests/test_synthesis.py", "training/tests/test_synthesis_options.py",
         "training/tests/test_operator_distribution.py"), seconds=400.0,
        note="each mutant runs the chi-square test of the operator draws (about 10,000 CP-SAT solves)",
    ),
}


@dataclass(frozen=True)
class Case:
    """A bug the issue named (it once passed every test): `before` in `path` (found exactly once) becomes `after`, and
    `tests` must then fail."""

    name: str
    path: str
    before: str
    after: str
    tests: tuple[str, ...]


CASES = (
    Case("generate turns a failed verification into status verified", "drtriton_lsp/engine/pipeline.py",
         'status="verified" if trial.verdict.verified else "failed",', 'status="verified",',
         ("tests/test_cli_write_refusals.py::test_a_kernel_that_fails_verification_is_reported_failed_and_not_written",
          "tests/server/test_apply_refusals.py")),
    Case("apply ignores whether the result is applicable", "drtriton_lsp/server/apply_kernel.py",
         "if found is None or result is None or not result.applicable:", "if found is None or result is None:",
         ("tests/server/test_apply_refusals.py",)),
    Case("the CLI's file-changed check removed", "drtriton_lsp/cli.py",
         "replace_if_unchanged(source_file.path, source_file.raw, new_bytes)",
         "source_file.path.write_bytes(new_bytes)",
         ("tests/test_cli_write_refusals.py::test_an_edit_saved_while_drtriton_works_is_kept_and_nothing_is_written",)),
    Case("float16 and bfloat16 tolerances loosened tenfold", "drtriton_lsp/worker/tolerances.py",
         'torch.float16: {"atol": 1e-2, "rtol": 1e-2},\n    torch.bfloat16: {"atol": 1e-2, "rtol": 1e-2},',
         'torch.float16: {"atol": 1e-1, "rtol": 1e-1},\n    torch.bfloat16: {"atol": 1e-1, "rtol": 1e-1},',
         ("tests/worker/test_tolerances.py",
          "tests/worker/test_judge_in_process.py::test_a_half_precision_result_three_tolerances_off_is_rejected")),
    Case("fresh-memory poisoning disabled", "drtriton_lsp/worker/op_audit.py",
         "    if tensor.is_floating_point() or tensor.is_complex():\n        tensor.normal_(",
         "    return\n    if tensor.is_floating_point() or tensor.is_complex():\n        tensor.normal_(",
         ("tests/worker/test_op_audit.py",)),
    Case("the L2 flush removed from the latency loop", "drtriton_lsp/worker/benchmark.py",
         "        flush_buffer.zero_()\n        start, end = ", "        start, end = ",
         ("tests/worker/test_bench_timing.py",)),
    Case("the L2 flush removed from the queued (device time) loop", "drtriton_lsp/worker/benchmark.py",
         "        flush_buffer.zero_()\n        start.record()", "        start.record()",
         ("tests/worker/test_bench_timing.py",)),
)
CASES_RECORD = REPO / "benchmarks" / "results" / "mutation_cases.json"


def run_cases() -> None:
    """Put each of the issue's bugs back, one at a time, in a scratch copy; record which tests fail."""
    scratch = scratch_copy("cases")
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(scratch), str(scratch / "training")])}
    records = []
    for case in CASES:
        path = scratch / case.path
        original = path.read_text()
        if original.count(case.before) != 1:
            raise SystemExit(f"{case.name}: the code it changes is not found once in {case.path}; update CASES")
        path.write_text(original.replace(case.before, case.after))
        started = time.monotonic()
        finished = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *case.tests],
                                  cwd=scratch, env=environment, capture_output=True, text=True)
        path.write_text(original)
        failed = sorted({line.split(" ")[1] for line in finished.stdout.splitlines() if line.startswith("FAILED ")})
        records.append({"case": case.name, "path": case.path, "before": case.before, "after": case.after,
                        "tests": list(case.tests), "caught": finished.returncode == 1, "failed": failed,
                        "seconds": round(time.monotonic() - started, 1)})
        print(f"{case.name}: {'caught' if records[-1]['caught'] else 'NOT CAUGHT'} {failed}", flush=True)
    CASES_RECORD.write_text(json.dumps({"commit": git_commit(), "date": datetime.date.today().isoformat(),
                                        "cases": records}, indent=1) + "\n")


def git_commit() -> str:
    head = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True)
    head = head.stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True,
                           text=True).stdout.strip()
    return head + ("+changes" if dirty else "")


def scratch_copy(name: str) -> Path:
    """The working tree's tracked and unignored files, copied where the tool may change them."""
    destination = SCRATCH / name
    if destination.exists():
        shutil.rmtree(destination)
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO,
                            capture_output=True, check=True).stdout.decode().split("\0")
    for relative in filter(None, listed):
        source = REPO / relative
        if source.is_file():
            (destination / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, destination / relative)
    return destination


EMBEDDED_FILE = "mutation_embedded.py"


def configuration(target: Target) -> str:
    pytest = ["-m", "pytest", "-x", "-q", "-p", "no:cacheprovider", *target.tests]
    module_path = target.path
    if target.embedded:  # mutate the code in a file of its own; `embed` puts it back before pytest runs
        pytest = ["benchmarks/mutation.py", "embed", target.path, target.embedded, EMBEDDED_FILE, *pytest]
        module_path = EMBEDDED_FILE
    test_command = shlex.join([sys.executable, *pytest])
    return "\n".join([
        "[cosmic-ray]",
        f"module-path = {json.dumps(module_path)}",
        f"timeout = {target.seconds}",
        "excluded-modules = []",
        f"test-command = {json.dumps(test_command)}",
        "",
        "[cosmic-ray.distributor]",
        'name = "local"',
        "",
        "[cosmic-ray.filters.operators-filter]",
        f"exclude-operators = {json.dumps(excluded_operators())}",
        "",
    ])


def run_module(name: str, cosmic_ray: Path, minutes: float | None, sample: int | None, recheck: bool) -> None:
    """Mutate one module and run its tests per mutant; with `recheck`, run only the last record's survivors again
    (after tests were added) and update that record."""
    target = TARGETS[name]
    previous = json.loads((RESULTS / f"{name}.json").read_text()) if recheck else None
    scratch = scratch_copy(name)
    (scratch / "mutation.toml").write_text(configuration(target))
    if target.embedded:
        (scratch / EMBEDDED_FILE).write_text(_embedded_code(scratch / target.path, target.embedded))
    environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(scratch), str(scratch / "training")])}
    tools = cosmic_ray.parent

    def tool(*arguments: str, timeout: float | None = None) -> subprocess.CompletedProcess:
        return subprocess.run([str(tools / arguments[0]), *arguments[1:]], cwd=scratch, env=environment,
                              capture_output=True, text=True, timeout=timeout)

    tool("cosmic-ray", "init", "mutation.toml", "session.sqlite").check_returncode()
    tool("cr-filter-operators", "session.sqlite", "mutation.toml").check_returncode()
    skip_annotations(scratch / "session.sqlite", scratch / (EMBEDDED_FILE if target.embedded else target.path))
    if target.left_out:
        skip_functions(scratch / "session.sqlite", scratch / target.path, target.left_out)
    if previous is not None:  # survivors already explained as equivalent are kept as they are, not run again
        explained = json.loads(EQUIVALENTS.read_text())
        unexplained = [s for s in previous["survivors"] if not _explanation(explained, name, s)]
        skip_all_but_survivors(scratch / "session.sqlite", scratch / target.path, unexplained)
    elif sample is not None:
        skip_all_but_a_sample(scratch / "session.sqlite", sample)
    print(f"{name}: baseline ({' '.join(target.tests)})", flush=True)
    baseline = tool("cosmic-ray", "baseline", "mutation.toml", timeout=target.seconds * 2)
    if baseline.returncode != 0:
        raise SystemExit(
            f"{name}: the tests fail without any mutation; fix them first\n{baseline.stdout}{baseline.stderr}"
        )
    started = time.monotonic()
    finished = run_within(
        [str(tools / "cosmic-ray"), "exec", "mutation.toml", "session.sqlite"], scratch, environment, minutes
    )
    dump = tool("cosmic-ray", "dump", "session.sqlite").stdout
    record = summarise(name, target, dump, finished, time.monotonic() - started, sample)
    if previous is not None:
        record = rechecked(previous, record, unexplained)
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"{name}: {record['killed']}/{record['mutants']} killed, {len(record['survivors'])} survived"
          + ("" if finished else f", {record['not_run']} not run (time limit)"), flush=True)


def _constant_node(tree: ast.Module, name: str) -> ast.Assign:
    return next(node for node in tree.body if isinstance(node, ast.Assign)
                and any(isinstance(t, ast.Name) and t.id == name for t in node.targets))


def _embedded_code(path: Path, name: str) -> str:
    return ast.literal_eval(_constant_node(ast.parse(path.read_text()), name).value)


def embed_and_run(path: Path, name: str, code_file: Path, pytest_arguments: list[str]) -> None:
    """Write `code_file`'s (mutated) text into the string constant `name` of `path`, then run pytest in this
    process's place (so its exit status is the test's)."""
    source = path.read_text()
    value = _constant_node(ast.parse(source), name).value
    lines = source.splitlines(keepends=True)
    start = sum(len(line) for line in lines[: value.lineno - 1]) + value.col_offset
    end = sum(len(line) for line in lines[: value.end_lineno - 1]) + value.end_col_offset
    path.write_text(source[:start] + repr(code_file.read_text()) + source[end:])
    os.execv(sys.executable, [sys.executable, *pytest_arguments])


def run_within(command: list[str], cwd: Path, environment: dict[str, str], minutes: float | None) -> bool:
    """Run cosmic-ray until it ends (True) or for `minutes` (False): then it and the tests it started (in sessions
    of their own, which a signal to its group would miss) are killed by process id."""
    import psutil

    process = subprocess.Popen(command, cwd=cwd, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        process.wait(timeout=minutes * 60 if minutes else None)
        return True
    except subprocess.TimeoutExpired:
        started = psutil.Process(process.pid).children(recursive=True)
        process.kill()
        for child in started:
            try:
                child.kill()
            except psutil.Error:
                continue
        process.wait()
        return False


def skip_all_but_a_sample(session: Path, size: int) -> None:
    """Keep a fixed random sample of the pending mutants (seed 0, in source order); the rest are marked skipped."""
    import sqlite3

    with sqlite3.connect(session) as database:
        pending = [row[0] for row in database.execute(
            "SELECT job_id FROM mutation_specs WHERE job_id NOT IN (SELECT job_id FROM work_results) "
            "ORDER BY start_pos_row, start_pos_col, operator_name, occurrence")]
        kept = set(random.Random(0).sample(pending, min(size, len(pending))))
        database.executemany(
            "INSERT INTO work_results (job_id, worker_outcome, output, test_outcome, diff) VALUES (?, 'SKIPPED', "
            "'not in the sample', NULL, NULL)",
            [(job,) for job in pending if job not in kept],
        )


def annotation_spans(source: str) -> list[tuple[tuple[int, int], tuple[int, int]]]:
    """Where the type annotations of a module that never evaluates them (`from __future__ import annotations`) lie:
    ((first row, column), (last row, end column)), rows from 1. Empty when annotations are evaluated."""
    tree = ast.parse(source)
    postponed = any(isinstance(node, ast.ImportFrom) and node.module == "__future__"
                    and any(alias.name == "annotations" for alias in node.names) for node in tree.body)
    if not postponed:
        return []
    annotations = []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            arguments = node.args
            annotations += [argument.annotation for argument in (
                *arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg)
                if argument is not None]
            annotations.append(node.returns)
        elif isinstance(node, ast.AnnAssign):
            annotations.append(node.annotation)
    return [((a.lineno, a.col_offset), (a.end_lineno, a.end_col_offset)) for a in annotations if a is not None]


def skip_annotations(session: Path, source: Path) -> None:
    """Mark the mutants inside type annotations as skipped, as mutmut does: under `from __future__ import
    annotations` an annotation is a string nothing here evaluates, so changing it changes no behaviour."""
    import sqlite3

    spans = annotation_spans(source.read_text())
    with sqlite3.connect(session) as database:
        pending = database.execute(
            "SELECT job_id, start_pos_row, start_pos_col FROM mutation_specs "
            "WHERE job_id NOT IN (SELECT job_id FROM work_results)").fetchall()
        database.executemany(
            "INSERT INTO work_results (job_id, worker_outcome, output, test_outcome, diff) VALUES (?, 'SKIPPED', "
            "'in a type annotation', NULL, NULL)",
            [(job,) for job, row, column in pending if any(start <= (row, column) < end for start, end in spans)],
        )


def skip_functions(session: Path, source: Path, names: tuple[str, ...]) -> None:
    """Mark the mutants inside the named top-level functions as skipped."""
    import ast
    import sqlite3

    spans = [(node.lineno, node.end_lineno) for node in ast.parse(source.read_text()).body
             if isinstance(node, ast.FunctionDef) and node.name in names]
    with sqlite3.connect(session) as database:
        pending = database.execute(
            "SELECT job_id, start_pos_row FROM mutation_specs WHERE job_id NOT IN (SELECT job_id FROM work_results)"
        ).fetchall()
        database.executemany(
            "INSERT INTO work_results (job_id, worker_outcome, output, test_outcome, diff) VALUES (?, 'SKIPPED', "
            "'in a function left out', NULL, NULL)",
            [(job,) for job, row in pending if any(first <= row <= last for first, last in spans)],
        )


def skip_all_but_survivors(session: Path, source: Path, survivors: list[dict]) -> None:
    """Keep the mutants made by a survivor's operator on a line that reads as the survivor's original line."""
    import sqlite3

    lines = source.read_text().splitlines()
    wanted = {(s["operator"], _original_line(s["diff"])) for s in survivors}
    with sqlite3.connect(session) as database:
        pending = database.execute(
            "SELECT job_id, operator_name, start_pos_row FROM mutation_specs "
            "WHERE job_id NOT IN (SELECT job_id FROM work_results)").fetchall()
        database.executemany(
            "INSERT INTO work_results (job_id, worker_outcome, output, test_outcome, diff) VALUES (?, 'SKIPPED', "
            "'not a survivor of the last run', NULL, NULL)",
            [(job,) for job, operator, row in pending
             if (operator.removeprefix("core/"), lines[row - 1].strip()) not in wanted],
        )


def _original_line(diff: str) -> str:
    return next((line[1:].strip() for line in diff.splitlines() if line.startswith("-")), "")


def rechecked(previous: dict, rerun: dict, run_again: list[dict]) -> dict:
    """The previous record with the survivors in `run_again` narrowed to those that survived the rerun (which must
    finish); the other survivors (explained as equivalent) stay."""
    if not rerun["finished"]:
        raise SystemExit("the recheck ran out of time; run it again without --minutes")
    lines = {survivor["diff"]: survivor["line"] for survivor in rerun["survivors"]}
    again = {s["diff"] for s in run_again}
    survivors = [{**s, "line": lines.get(s["diff"], s["line"])} for s in previous["survivors"]
                 if s["diff"] not in again or s["diff"] in lines]
    return {
        **previous, "survivors": survivors,
        "killed": previous["killed"] + len(previous["survivors"]) - len(survivors),
        "commit": rerun["commit"], "date": rerun["date"], "tests": rerun["tests"],
        "rechecked": f"{len(run_again)} unexplained survivors run again after new tests: "
                     f"{len(survivors) - (len(previous['survivors']) - len(run_again))} left",
    }


def summarise(name: str, target: Target, dump: str, finished: bool, seconds: float, sample: int | None) -> dict:
    killed, survivors, not_run, incompetent = 0, [], 0, 0
    for line in filter(None, dump.splitlines()):
        item, result = json.loads(line)
        if result is None:
            not_run += 1
            continue
        if result["worker_outcome"] == "skipped":
            continue
        outcome = result.get("test_outcome")
        if outcome == "killed":
            killed += 1
        elif outcome == "survived":
            mutation = item["mutations"][0]
            survivors.append({
                "line": mutation["start_pos"][0],
                "operator": mutation["operator_name"].removeprefix("core/"),
                "diff": _changed_lines(result.get("diff") or ""),
            })
        else:
            incompetent += 1
    return {
        "module": name, "path": target.path + (f" ({target.embedded})" if target.embedded else ""),
        "tests": list(target.tests), "note": target.note,
        "tool": TOOL, "commit": git_commit(), "date": datetime.date.today().isoformat(),
        "mutants": killed + len(survivors), "killed": killed, "survivors": sorted(survivors, key=lambda s: s["line"]),
        "incompetent": incompetent, "not_run": not_run, "finished": finished, "sample": sample,
        "minutes": round(seconds / 60, 1),
    }


def _changed_lines(diff: str) -> str:
    """A unified diff's removed and added lines (its file header left out): the mutant's key."""
    return "\n".join(line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in ("+++", "---"))


def write_summary() -> None:
    records = [json.loads(path.read_text()) for path in sorted(RESULTS.glob("*.json"))]
    order = list(TARGETS)
    records.sort(key=lambda r: order.index(r["module"]) if r["module"] in order else len(order))
    explained = json.loads(EQUIVALENTS.read_text())
    total = sum(r["mutants"] for r in records)
    killed = sum(r["killed"] for r in records)
    equivalents = sum(1 for r in records for s in r["survivors"] if _explanation(explained, r["module"], s))
    lines = [
        "# Mutation testing",
        "",
        f"- date: {max((r['date'] for r in records), default='-')}; commit: "
        f"{', '.join(sorted({r['commit'] for r in records})) or '-'}; "
        f"tool: {TOOL} (operators: see benchmarks/mutation.py)",
        f"- command: `make mutation` (all modules) or `make mutation MODULE=NAME`",
        f"- mutants run: {total}, killed: {killed} ({100 * killed / total:.1f} %), killed or explained: "
        f"{killed + equivalents} ({100 * (killed + equivalents) / total:.1f} %)" if total else "- no module run yet",
        "- explained: an equivalent mutant (no behaviour changes), or one only a GPU run can observe (said so); "
        "type annotations are not mutated where a module postpones them (`from __future__ import annotations`: "
        "they are never evaluated)",
        "",
        "| module | mutants | killed | survived | killed % | explained | killed or explained % | run | tests |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in records:
        equivalent = [s for s in r["survivors"] if _explanation(explained, r["module"], s)]
        share = f"{100 * r['killed'] / r['mutants']:.1f}" if r["mutants"] else "-"
        share += f" | {len(equivalent)} | " + (
            f"{100 * (r['killed'] + len(equivalent)) / r['mutants']:.1f}" if r["mutants"] else "-")
        run = "all" if r["finished"] and not r["sample"] else (
            f"sample of {r['sample']}" if r["sample"] and r["finished"]
            else f"sample of {r['sample']}, {r['mutants']} run (time limit)" if r["sample"]
            else f"{r['mutants']} of {r['mutants'] + r['not_run']} (time limit)")
        if r.get("rechecked"):
            run += f"; then {r['rechecked']}"
        if r.get("annotations_dropped"):
            run += (f"; {r['annotations_dropped']} surviving mutants of type annotations dropped from this record "
                    "(annotations are no longer mutated)")
        lines.append(f"| {r['path']} | {r['mutants']} | {r['killed']} | {len(r['survivors'])} | {share} | "
                     f"{run}, {r['minutes']} min | {' '.join(r['tests'])} |")
    lines += ["", "Not run at all: " + (", ".join(sorted(set(TARGETS) - {r["module"] for r in records})) or "none"), ""]
    for r in records:
        if r["note"]:
            lines.append(f"- {r['module']}: {r['note']}")
    lines += _cases_section()
    lines += ["", "## Survivors", ""]
    for r in records:
        if not r["survivors"]:
            continue
        lines += [f"### {r['path']}", ""]
        for survivor in r["survivors"]:
            why = _explanation(explained, r["module"], survivor) or "not explained yet: a test is missing"
            diff = survivor["diff"].replace("\n", " / ").replace("|", "\\|")
            lines.append(f"- line {survivor['line']}, {survivor['operator']}: `{diff}`: {why}")
        lines.append("")
    SUMMARY.write_text("\n".join(lines))


def _cases_section() -> list[str]:
    if not CASES_RECORD.exists():
        return ["", "## The issue's cases", "", "Not checked yet: `python benchmarks/mutation.py cases`."]
    record = json.loads(CASES_RECORD.read_text())
    lines = [
        "", "## The issue's cases", "",
        f"Each bug the issue found uncaught, put back alone in a scratch copy (`python benchmarks/mutation.py cases`, "
        f"{record['date']}, commit {record['commit']}); the tests named must then fail.", "",
        "| bug put back | file | change | tests run | caught by | seconds |", "|---|---|---|---|---|---|",
    ]
    for case in record["cases"]:
        change = f"`{case['before']}` -> `{case['after']}`".replace("\n", " ").replace("|", "\\|")
        change = re.sub(" {2,}", " ", change)
        caught = ", ".join(f"`{name}`" for name in case["failed"]) if case["caught"] else "**NOT CAUGHT**"
        lines.append(f"| {case['case']} | {case['path']} | {change} | {' '.join(case['tests'])} | {caught} | "
                     f"{case['seconds']} |")
    return lines


def _explanation(explained: dict, module: str, survivor: dict) -> str:
    """Why a surviving mutant is equivalent (benchmarks/mutation_equivalent.json, keyed by its diff lines)."""
    return explained.get(module, {}).get(survivor["diff"], "")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="mutate modules and run their tests")
    run.add_argument("modules", nargs="*", help=f"module names (default: all): {', '.join(TARGETS)}")
    run.add_argument("--cosmic-ray", type=Path, default=REPO / ".venv-mutation" / "bin" / "cosmic-ray")
    run.add_argument("--minutes", type=float, help="stop each module after this long (its record says so)")
    run.add_argument("--sample", type=int, help="run a fixed random sample of this many mutants per module")
    run.add_argument("--recheck", action="store_true", help="run the last record's survivors again (after new tests)")
    commands.add_parser("report", help="write benchmarks/results/mutation.md from the module records")
    commands.add_parser("cases", help="put back each bug the issue named, alone, and record which tests fail")
    embed = commands.add_parser("embed", help="(the test command of an embedded target) put code back, run pytest")
    embed.add_argument("path", type=Path)
    embed.add_argument("constant")
    embed.add_argument("code_file", type=Path)
    embed.add_argument("pytest_arguments", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    if args.command == "embed":
        embed_and_run(args.path, args.constant, args.code_file, args.pytest_arguments)
    if args.command == "cases":
        run_cases()
    if args.command == "run":
        unknown = sorted(set(args.modules) - set(TARGETS))
        if unknown:
            parser.error(f"no module named {', '.join(unknown)}; choose from {', '.join(TARGETS)}")
        for name in args.modules or list(TARGETS):
            run_module(name, args.cosmic_ray, args.minutes, args.sample, args.recheck)
    write_summary()


if __name__ == "__main__":
    main()
