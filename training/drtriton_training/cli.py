"""`drtriton-train`: the training package's command line: synth, teach, sft, eval.

`synth` writes CSP-DAG programs; `teach` turns them into SFT examples; `sft` trains a model; `eval` measures it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from drtriton_training.dataset import HELDOUT_SEED, synthesize_training, write_dataset


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="drtriton-train", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    synth = commands.add_parser("synth", help="generate synthetic KernelBench-form programs (CSP-DAG)")
    synth.add_argument("--levels", default="1,2,5", help="comma-separated levels (compute ops per program)")
    synth.add_argument("--count", type=int, required=True, help="programs per level")
    synth.add_argument("--seed", type=int, default=0, help=f"base seed (not {HELDOUT_SEED}: held-out sets)")
    synth.add_argument("--out", type=Path, required=True, help="output directory")
    synth.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (default: all cores)")
    _add_teach(commands)
    args = parser.parse_args(argv)
    if args.command == "teach":
        return _teach(parser, args)

    try:
        levels = [int(level) for level in args.levels.split(",")]
    except ValueError:
        parser.error(f"--levels takes comma-separated integers such as 1,2,5; got {args.levels!r}")
    if any(level < 1 for level in levels) or args.count < 1:
        parser.error("levels and --count must be at least 1")
    started = time.perf_counter()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    try:
        with Progress(*columns, transient=not sys.stderr.isatty()) as progress:
            programs = synthesize_training(levels, args.count, args.seed, workers=args.workers, progress=progress)
    except ValueError as error:
        parser.error(str(error))
    index = write_dataset(programs, args.out)
    elapsed = time.perf_counter() - started
    print(f"wrote {len(programs)} programs to {args.out} ({index.name}) in {elapsed:.1f} s")
    return 0


def _add_teach(commands) -> None:
    teach = commands.add_parser(
        "teach",
        help="the compiler and verifier as teacher: programs -> verified SFT examples (JSONL)",
        description="Capture each program, compile the compiler's default schedule, verify the candidate with "
        "drtriton's verifier, and append script-writer and kernel-writer examples to OUT. Sharded (run one "
        "process per shard) and resumable (programs already in OUT are skipped).",
    )
    teach.add_argument("--programs", type=Path, required=True, help="a `drtriton-train synth` output directory")
    teach.add_argument("--out", type=Path, required=True, help="directory of examples-*.jsonl and programs-*.jsonl")
    teach.add_argument("--shard", default="0/1", help="INDEX/COUNT: teach only this shard's programs (default 0/1)")
    teach.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="where verification runs")
    teach.add_argument(
        "--verify", action=argparse.BooleanOptionalAction, default=True,
        help="verify each candidate (default); --no-verify writes examples marked unverified, ~10x faster on CPU",
    )
    teach.add_argument("--search", action="store_true", help="GPU: also search schedules for refinement pairs")
    teach.add_argument("--search-seconds", type=float, default=30.0, help="search budget per program (seconds)")
    teach.add_argument("--trials", type=int, default=5, help="verification trials with fresh inputs")
    teach.add_argument("--limit", type=int, help="teach at most this many programs in this run")
    teach.add_argument("--time-limit", type=float, help="start no program after this many seconds (then resume)")


def _teach(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from drtriton_lsp.engine.search import SearchBudget
    from drtriton_lsp.errors import DrtritonError

    from drtriton_training.teach import Shard, TeachOptions, read_programs, teach

    try:
        shard = Shard.parse(args.shard)
    except ValueError as error:
        parser.error(str(error))
    if args.search and (args.device != "cuda" or not args.verify):
        parser.error("--search needs --device cuda and verification: choosing schedules needs GPU timings")
    options = TeachOptions(
        device=args.device, verify=args.verify, search=args.search,
        search_budget=SearchBudget(seconds=args.search_seconds), trials=args.trials,
    )
    try:
        programs = read_programs(args.programs)
        summary = teach(
            programs, args.out, options, shard=shard, limit=args.limit, time_limit_s=args.time_limit,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
    except DrtritonError as error:
        print(f"drtriton-train teach: {error.message}\n  {error.hint}", file=sys.stderr)
        return 1
    print(f"shard {args.shard}: {summary.line()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
