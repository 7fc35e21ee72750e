"""Time to the first verified kernel, with the job's workers started cold or ahead (the editor's warmWorker).

Runs `optimize_target` on each target, alternating a cold start with one whose capture and verification
workers were started `--ahead` seconds earlier (as the language server does when a target's lens is shown),
and records each run's `first_verified_s` and per-step seconds (`search.stages_s`). Medians go to a table.
Usage: python benchmarks/first_verified.py --device cpu --rounds 3 --out benchmarks/results
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from drtriton_lsp.bench.suite import git_commit  # noqa: E402
from drtriton_lsp.engine.devices import likely_device  # noqa: E402
from drtriton_lsp.engine.pipeline import OptimizeOptions, optimize_target  # noqa: E402
from drtriton_lsp.engine.session import WorkerSession  # noqa: E402
from drtriton_lsp.engine.verify import worker_environment  # noqa: E402
from drtriton_lsp.runners.local import LocalRunner, worker_python_path  # noqa: E402

DEFAULT_TARGETS = (
    "examples/scaled_activation_chain.py:ScaledActivation",
    "examples/norm_activation.py:NormGate",
    "examples/mlp_block.py:MLPBlock",
)
STARTS = ("cold", "ahead")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("targets", nargs="*", default=list(DEFAULT_TARGETS), help="FILE:TARGET (default: three examples)")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--rounds", type=int, default=3, help="runs of each start per target, interleaved")
    parser.add_argument("--ahead", type=float, default=15.0, help="seconds between starting the worker and the job")
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--out", type=Path, help="folder for first-verified.json and first-verified.md")
    args = parser.parse_args()

    runs = []
    for spec in args.targets:
        file, target = spec.rsplit(":", 1)
        path = str((REPO / file).resolve()) if not Path(file).is_absolute() else file
        for round_number in range(args.rounds):
            for start in STARTS:
                report = _run(path, target, start, args)
                runs.append({"target": spec, "start": start, "round": round_number, "status": report["status"],
                             "first_verified_s": report["search"].get("first_verified_s"),
                             "stages_s": report["search"]["stages_s"],
                             "judge_s": (report.get("correctness") or {}).get("seconds", {})})
                print(f"{spec} {start}: {runs[-1]['first_verified_s']} s {runs[-1]['stages_s']}", file=sys.stderr, flush=True)

    command = "python benchmarks/first_verified.py " + " ".join(sys.argv[1:])
    text = render(runs, command, args)
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "first-verified.json").write_text(json.dumps({"command": command, "runs": runs}, indent=2) + "\n")
        (args.out / "first-verified.md").write_text(text)
    return 0 if all(run["status"] == "verified" for run in runs) else 1


def _run(path: str, target: str, start: str, args) -> dict:
    options = OptimizeOptions(device=args.device, trials=args.trials, benchmark=False)
    with LocalRunner() as warm, LocalRunner() as runner:
        if start == "ahead":
            python_path = worker_python_path(path)
            warm.prepare(python_path=python_path, method="capture")
            warm.prepare(env=worker_environment(likely_device(args.device)), python_path=python_path, method="verify")
            time.sleep(args.ahead)  # the user reads the lens, then asks
            runner.take_spare_from(warm)
        session = WorkerSession.for_file(runner, path)
        outcome = optimize_target(Path(path).read_text(), path, target, options=options, session=session)
    return outcome.report


def render(runs: list[dict], command: str, args) -> str:
    lines = [
        "# Time to the first verified kernel: cold workers against workers started ahead",
        "",
        f"- command: `{command}`",
        f"- commit: {git_commit(REPO)}",
        f"- machine: {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs; device {args.device}",
        f"- versions: python {platform.python_version()}, {_versions()}",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        f"- method: per target, {args.rounds} rounds of a cold start then a start {args.ahead:g} s after the capture and "
        "verification workers were started ahead; medians of `first_verified_s` and of each step's seconds "
        "(`search.stages_s`) and of the judge's phases (`correctness.seconds`)",
        "",
        "| target | start | runs | first verified s | capture s | verify s | judge's phases s | each run's first verified s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for target in dict.fromkeys(run["target"] for run in runs):
        for start in STARTS:
            chosen = [run for run in runs if run["target"] == target and run["start"] == start]
            if not chosen:
                continue
            first = _median([run["first_verified_s"] for run in chosen])
            capture = _median([run["stages_s"].get("capture") for run in chosen])
            verify = _median([run["stages_s"].get("verify") for run in chosen])
            phases = dict.fromkeys(phase for run in chosen for phase in run.get("judge_s", {}))
            judge = ", ".join(f"{phase} {_median([run['judge_s'].get(phase) for run in chosen])}" for phase in phases)
            every = ", ".join(f"{run['first_verified_s']}" for run in chosen)
            lines.append(f"| {target} | {start} | {len(chosen)} | {first} | {capture} | {verify} | {judge or '-'} | {every} |")
    return "\n".join(lines) + "\n"


def _median(values: list) -> float | str:
    present = [value for value in values if value is not None]
    return round(statistics.median(present), 2) if present else "-"


def _versions() -> str:
    import torch
    import triton

    return f"torch {torch.__version__}, triton {triton.__version__}"


if __name__ == "__main__":
    raise SystemExit(main())
