"""`drtriton-train`: the training package's command line (part 1: `synth`, dataset generation).

`drtriton-train synth --levels 1,2,5 --count N --seed S --out DIR` writes programs and index.jsonl.
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
    args = parser.parse_args(argv)

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


if __name__ == "__main__":
    sys.exit(main())
