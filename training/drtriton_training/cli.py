"""`drtriton-train`: the training package's command line: synth, teach, sft, rl, eval, compare.

`synth` writes CSP-DAG programs; `teach` turns them into SFT examples; `sft` trains a model; `rl` trains it further
against the verifier; `eval` measures it; `compare` measures what it adds to the product's search.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from drtriton_training.programs import HELDOUT_SEED, write_dataset


def build_parser() -> argparse.ArgumentParser:
    """`drtriton-train` and its commands, with every option (the docs' tests read them too)."""
    parser = argparse.ArgumentParser(prog="drtriton-train", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    synth = commands.add_parser("synth", help="generate synthetic KernelBench-form programs (CSP-DAG)")
    synth.add_argument("--levels", default="1,2,5", help="comma-separated levels (compute ops per program)")
    synth.add_argument("--count", type=int, required=True, help="programs per level")
    synth.add_argument("--seed", type=int, default=0, help=f"base seed (not {HELDOUT_SEED}: held-out sets)")
    synth.add_argument("--out", type=Path, required=True, help="output directory")
    synth.add_argument("--workers", type=int, default=os.cpu_count() or 1, help="processes (default: all cores)")
    _add_teach(commands)
    _add_sft(commands)
    _add_rl(commands)
    _add_eval(commands)
    _add_compare(commands)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "eval":
        return _eval(parser, args)
    if args.command == "compare":
        return _compare(parser, args)
    if args.command == "teach":
        return _teach(parser, args)
    if args.command == "sft":
        return _sft(parser, args)
    if args.command == "rl":
        return _rl(parser, args)
    return _synth(parser, args)


def _synth(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from drtriton_training.dataset import synthesize_training  # synthesis alone needs OR-Tools (programs.py)

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
            progress=_log,
        )
    except DrtritonError as error:
        print(f"drtriton-train teach: {error.message}\n  {error.hint}", file=sys.stderr)
        return 1
    print(f"shard {args.shard}: {summary.line()}")
    return 0


def _add_sft(commands) -> None:
    sft = commands.add_parser(
        "sft",
        help="supervised fine-tuning on teach examples (trl SFTTrainer); resumable",
        description="Train the recipe NAME (tiny: CPU, CI; small: the shipped model, one GPU; 7b: LoRA on a "
        "pretrained code model) on teach examples; run it again with the same --out to resume from its checkpoint. "
        "Fields are documented in drtriton_training/sft_configs.py.",
    )
    sft.add_argument("--config", required=True, help="recipe: tiny, small or 7b")
    sft.add_argument("--data", type=Path, action="append", required=True, help="a teach output directory (repeatable)")
    sft.add_argument("--out", type=Path, required=True, help="run directory: tokenizer/, checkpoints/, model/")
    sft.add_argument("--base", help="a pretrained checkpoint directory to fine-tune (sets base_model)")
    sft.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                     help="override a recipe field, e.g. --set max_steps=20 (repeatable)")


def _sft(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from drtriton_lsp.errors import DrtritonError

    from drtriton_training.sft import sft
    from drtriton_training.sft_configs import recipe

    overrides = list(args.overrides) + ([f"base_model={args.base}"] if args.base else [])
    try:
        chosen = recipe(args.config, overrides)
    except ValueError as error:
        parser.error(str(error))
    try:
        manifest = sft(chosen, args.data, args.out)
    except DrtritonError as error:
        print(f"drtriton-train sft: {error.message}\n  {error.hint}", file=sys.stderr)
        return 1
    state = "complete" if manifest["complete"] else "stopped early: run the same command again to resume"
    print(f"sft {chosen.name}: {manifest['steps']} steps ({state}); model in {args.out / 'model'}")
    return 0


def _add_rl(commands) -> None:
    rl = commands.add_parser(
        "rl",
        help="curriculum RL from an SFT model, rewarded by the verifier (DRPO or GRPO on trl); resumable",
        description="Sample rollouts for CSP-DAG programs of the curriculum's level, judge each with drtriton's "
        "verifier (and on a GPU its benchmark) in worker processes, and train with DRPO's decoupled objective or "
        "GRPO's summed reward; advance a level when validation pass@1 reaches the threshold. Fields are documented "
        "in drtriton_training/rl_configs.py.",
    )
    rl.add_argument("--config", required=True, help="recipe: tiny (CPU, CI), small (one GPU) or multi_gpu")
    rl.add_argument("--steps", type=int, help="optimiser steps in all (sets max_steps; a resumed run goes on to it)")
    rl.add_argument("--out", type=Path, required=True, help="run directory: programs, checkpoints, logs, model/")
    rl.add_argument("--objective", choices=("drpo", "grpo"), default="drpo",
                    help="drpo (default): decoupled correctness and speed; grpo: their sum as one reward")
    rl.add_argument("--model", help="the SFT model directory to start from (default: the config's)")
    rl.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    rl.add_argument("--capture-only", action="store_true",
                    help="synthesise and capture the run's programs into OUT/programs.jsonl and stop (needs OR-Tools; "
                    "a run directory holding that file trains without it)")
    rl.add_argument("--advance-threshold", type=float, help="validation pass@1 that advances a level (default 0.5)")
    rl.add_argument("--set", dest="overrides", action="append", default=[], metavar="FIELD=VALUE",
                    help="override a recipe field, e.g. --set eval_every_steps=5 (repeatable)")
    rl.add_argument("--reward-gpus", metavar="IDS",
                    help="GPUs of this host the reward processes spread over, e.g. 4,5,6,7 (a lock file per GPU; "
                    "default: the training process's own GPU)")
    rl.add_argument("--cluster", metavar="ADDRESS",
                    help="judge rollouts as tasks of a Ray cluster: ray://HEAD:PORT (Ray Client), HEAD:PORT or auto "
                    "(this machine is a node), or local (a Ray of this machine's own); needs the cluster extra")


def _rl(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from drtriton_lsp.errors import DrtritonError

    from drtriton_training.rl import capture_programs, rl
    from drtriton_training.rl_configs import recipe

    overrides = list(args.overrides)
    overrides += [f"max_steps={args.steps}"] if args.steps is not None else []
    overrides += [f"model={args.model}"] if args.model else []
    overrides += [f"advance_threshold={args.advance_threshold}"] if args.advance_threshold is not None else []
    overrides += [f"reward_gpus={args.reward_gpus}"] if args.reward_gpus else []
    try:
        chosen = recipe(args.config, overrides)
    except ValueError as error:
        parser.error(str(error))
    try:
        if args.capture_only:
            print(capture_programs(chosen, args.out, args.cluster, _log))
            return 0
        manifest = rl(chosen, args.out, objective=args.objective, resume=args.resume, cluster=args.cluster, log=_log)
    except DrtritonError as error:
        print(f"drtriton-train rl: {error.message}\n  {error.hint}", file=sys.stderr)
        return 1
    state = "complete" if manifest["complete"] else "stopped early: run again with --resume to continue"
    level = manifest["rl"]["curriculum"]["levels"][manifest["rl"]["curriculum"]["index"]]
    print(f"rl {chosen.name} ({args.objective}): {manifest['steps']} steps ({state}), level {level}; "
          f"model in {args.out / 'model'}")
    return 0


def _add_eval(commands) -> None:
    evaluate = commands.add_parser(
        "eval",
        help="a trained model on the held-out sets: valid share, pass@1, pass@k, speed of the best of k on a GPU",
        description="Sample k answers per held-out program from the model, decode and verify them with drtriton's "
        "verifier, and (on a GPU) time the best verified one against eager PyTorch and torch.compile. Writes "
        "NAME.json and NAME.md under --results.",
    )
    evaluate.add_argument("--model", type=Path, required=True, help="a model directory (`sft --out DIR`: DIR/model)")
    evaluate.add_argument("--levels", default="1,2,5,20", help="held-out levels (default 1,2,5,20)")
    evaluate.add_argument("--per-level", type=int, default=100, help="first N programs of each level (default 100)")
    evaluate.add_argument("--samples", type=int, default=4, help="k: samples per program (default 4)")
    evaluate.add_argument("--temperature", type=float, default=0.8, help="sampling temperature; 0: greedy (k = 1)")
    evaluate.add_argument("--kind", choices=("script", "kernel"), default="script", help="which writer the model is")
    evaluate.add_argument("--device", choices=("cpu", "cuda"), default="cpu", help="sampling and verification device")
    evaluate.add_argument("--baseline", action="store_true", help="also verify (GPU: time) the compiler's default")
    evaluate.add_argument("--trials", type=int, default=5, help="verification trials with fresh inputs")
    evaluate.add_argument("--unconstrained", action="store_true",
                          help="sample script answers freely (default: held to the script grammar, as the product "
                          "serves the model)")
    evaluate.add_argument("--time-limit", type=float, help="start no program after this many seconds (partial results)")
    evaluate.add_argument("--workers", type=int, default=1,
                          help="programs judged at once (default 1; on a GPU their timings still run alone)")
    evaluate.add_argument("--programs", type=Path,
                          help="an `rl` run's programs.jsonl: evaluate its validation split (GPU-sized with the "
                          "`small` config) instead of the shipped held-out sets")
    evaluate.add_argument("--results", type=Path, default=Path("training/results"), help="output directory")
    evaluate.add_argument("--name", default="eval", help="file name stem of the results (default eval)")


def _eval(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from drtriton_lsp.errors import DrtritonError

    from drtriton_training.evaluate import EvalOptions, evaluate, write_results

    levels = _heldout_levels(parser, args)
    options = EvalOptions(
        levels=levels, per_level=args.per_level, samples=args.samples, kind=args.kind, temperature=args.temperature,
        device=args.device, baseline=args.baseline, time_limit_s=args.time_limit, trials=args.trials,
        constrained=not args.unconstrained, workers=args.workers, programs=args.programs,
    )
    try:
        results = evaluate(args.model, options, log=_log)
    except DrtritonError as error:
        print(f"drtriton-train eval: {error.message}\n  {error.hint}", file=sys.stderr)
        return 1
    json_path, markdown_path = write_results(results, args.results, args.name)
    overall = results["overall"]
    print(
        f"eval: {overall['programs']} programs, valid {_share(overall['valid_share'])}, pass@1 "
        f"{_share(overall['pass@1'])}, pass@{args.samples} {_share(overall[f'pass@{args.samples}'])}; "
        f"{json_path} and {markdown_path}"
    )
    return 0


def _add_compare(commands) -> None:
    compare = commands.add_parser(
        "compare",
        help="the product's search with the compiler alone against compiler + model, on held-out programs",
        description="Write the first N held-out programs of each level as KernelBench files and run `drtriton bench` "
        "on them twice: with the model's answers beside the compiler's search, then with the compiler's search "
        "alone, its budget raised by the model's mean time per program. Writes NAME.json and NAME.md under "
        "--results (the two bench runs stay under --work).",
    )
    compare.add_argument("--model", type=Path, required=True, help="a model directory (`sft --out DIR`: DIR/model)")
    compare.add_argument("--levels", default="1,2,5,20", help="held-out levels (default 1,2,5,20)")
    compare.add_argument("--per-level", type=int, default=10, help="first N programs of each level (default 10)")
    compare.add_argument("--device", choices=("cpu", "cuda"), default="cuda",
                         help="cuda (default): search and timing; cpu: verification only, no speed")
    compare.add_argument("--search-seconds", type=float, default=10.0,
                         help="compiler search budget per program beside the model (default 10)")
    compare.add_argument("--samples", type=int, default=4, help="model answers per program (default 4)")
    compare.add_argument("--turns", type=int, default=1, help="model refinement turns (default 1)")
    compare.add_argument("--kind", choices=("script", "kernel"), default="script", help="which writer the model is")
    compare.add_argument("--jobs", type=int, default=1, help="problems at a time in each bench run (default 1)")
    compare.add_argument("--trials", type=int, default=5, help="verification trials with fresh inputs")
    compare.add_argument("--work", type=Path, required=True, help="folder for the programs and the two bench runs")
    compare.add_argument("--results", type=Path, default=Path("training/results"), help="output directory")
    compare.add_argument("--name", default="compare", help="file name stem of the results (default compare)")


def _compare(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from drtriton_lsp.errors import DrtritonError

    from drtriton_training.compare import COMPILER_ARM, MODEL_ARM, CompareOptions, run_compare, to_markdown
    from drtriton_training.evaluate import table_cell, write_results

    levels = _heldout_levels(parser, args)
    if args.jobs < 1 or args.turns < 0:
        parser.error("--jobs must be at least 1 and --turns at least 0")
    options = CompareOptions(
        levels=levels, per_level=args.per_level, device=args.device, search_seconds=args.search_seconds,
        samples=args.samples, turns=args.turns, kind=args.kind, jobs=args.jobs, trials=args.trials,
    )
    try:
        results = run_compare(args.model, options, args.work, log=_log)
    except DrtritonError as error:
        print(f"drtriton-train compare: {error.message}\n  {error.hint}", file=sys.stderr)
        return 1
    json_path, markdown_path = write_results(results, args.results, args.name, render=to_markdown)
    for arm in (COMPILER_ARM, MODEL_ARM):
        summary = results[arm]
        geomean = table_cell(summary["geomean_vs_compile"])
        speed = "no speed measured" if summary["faster_than_compile"] is None else (
            f"{summary['faster_than_compile']} faster than torch.compile, geomean {geomean}"
        )
        print(f"{arm}: {summary['verified']}/{summary['problems']} verified, {speed}, {summary['model_winners']} "
              "model winners")
    print(f"compare: {json_path} and {markdown_path}")
    return 0


def _heldout_levels(parser: argparse.ArgumentParser, args: argparse.Namespace) -> tuple[int, ...]:
    """--levels as held-out levels, after checking --samples, --per-level and --model (exits with the problem)."""
    from drtriton_training.programs import HELDOUT_LEVELS

    try:
        levels = tuple(int(level) for level in args.levels.split(","))
    except ValueError:
        parser.error(f"--levels takes comma-separated held-out levels such as 1,2; got {args.levels!r}")
    if getattr(args, "programs", None) is None and not set(levels) <= set(HELDOUT_LEVELS):
        parser.error(f"held-out levels are {', '.join(map(str, HELDOUT_LEVELS))}; got {args.levels}")
    if args.samples < 1 or args.per_level < 1:
        parser.error("--samples and --per-level must be at least 1")
    if getattr(args, "workers", 1) < 1:
        parser.error("--workers must be at least 1")
    if not (args.model / "config.json").is_file() and not (args.model / "adapter_config.json").is_file():
        parser.error(f"{args.model} holds no model (config.json); pass the model/ directory of an sft run")
    return levels


def _log(line: str) -> None:
    """Progress lines go to stderr, so stdout holds only each command's result."""
    print(line, file=sys.stderr, flush=True)


def _share(value) -> str:
    return "-" if value is None else f"{100 * value:.0f} %"


if __name__ == "__main__":
    sys.exit(main())
