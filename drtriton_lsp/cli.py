"""The `drtriton` command line: optimize a file's modules, verify a candidate, benchmark a suite, or serve as a worker.

Exit codes: 0 every target (bench: every problem) verified; 1 a candidate was rejected or none was
generated; 2 bad input (file, syntax, target, example inputs, capture, device, a --remote host that cannot be
reached or has no drtriton); 3 internal error;
130 interrupted (bench: the results so far are written).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
import traceback
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.text import Text

from drtriton_lsp import __version__
from drtriton_lsp.errors import DrtritonError, WorkerError

EXIT_OK = 0
EXIT_NOT_VERIFIED = 1
EXIT_BAD_INPUT = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "worker":
        from drtriton_lsp.worker.main import exit_now
        from drtriton_lsp.worker.main import main as worker_main

        exit_now(worker_main())
    console = Console(stderr=True)
    try:
        if args.command == "optimize":
            return optimize_command(args, console)
        if args.command == "bench":
            return bench_command(args, console, sys.argv[1:] if argv is None else argv)
        return verify_command(args, console)
    except WorkerError as error:
        say(console, "internal error: ", "bold red", f"{error.message}\n{error.hint}")
        return EXIT_INTERNAL
    except DrtritonError as error:
        say(console, "error: ", "bold red", error.located())
        if error.hint:
            say(console, "what to do: ", "yellow", error.hint)
        return EXIT_BAD_INPUT
    except KeyboardInterrupt:
        console.print("[yellow]interrupted: worker stopped, nothing written[/]")
        return EXIT_INTERRUPTED
    except Exception:  # noqa: BLE001 - a bug in drtriton: show it, exit with the internal-error code
        console.print("[bold red]internal error (a drtriton bug, please report it):[/]")
        console.print(traceback.format_exc(), markup=False, highlight=False)
        return EXIT_INTERNAL


class ProgressLines:
    """Progress where no spinner can be drawn (output to a file or a CI log): each new message printed once, on its
    own line, with the seconds since the step began."""

    def __init__(self, console: Console, text: str | Text):
        self.console, self.started, self.last = console, time.monotonic(), ""
        self.update(text)

    def update(self, text: str | Text) -> None:
        plain = text.plain if isinstance(text, Text) else text
        if plain != self.last:
            self.last = plain
            self.console.print(f"[{time.monotonic() - self.started:6.1f} s] {plain}", markup=False, highlight=False)

    def __enter__(self) -> "ProgressLines":
        return self

    def __exit__(self, *_exc) -> None:
        return None


def progress_display(console: Console, text: str | Text):
    """A spinner with the latest message on a terminal, else one line per message (ProgressLines); both have
    `update(text)`."""
    if console.is_terminal:
        return console.status(text, spinner="dots")
    return ProgressLines(console, text)


def say(console: Console, label: str, style: str, text: str) -> None:
    """Print a styled label and then user text verbatim (brackets in code are not markup)."""
    console.print(Text(label, style=style) + Text(text), highlight=False)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="drtriton", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"drtriton {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)

    optimize = commands.add_parser("optimize", help="generate, verify and benchmark Triton kernels for a file's modules")
    optimize.add_argument("file", type=Path)
    optimize.add_argument("--target", help="the module or function to optimize (default: every target with example inputs)")
    _device_option(optimize)
    _remote_options(optimize)
    optimize.add_argument("--json", type=Path, help="write the report (a list of reports for several targets) as JSON")
    optimize.add_argument("--markdown", type=Path, help="write the report as Markdown")
    optimize.add_argument("--write", action="store_true", help="write verified kernels back into FILE")
    optimize.add_argument(
        "--write-test",
        action="store_true",
        help="with --write: also write a pytest file per kernel (beside FILE, or in its tests/ folder) comparing "
        "the kernels with the original, and write nothing unless it passes",
    )
    optimize.add_argument("--trials", type=int, default=5, help="verification trials with fresh inputs (default 5)")
    optimize.add_argument(
        "--search",
        action="store_true",
        help="test-time search over schedules on the GPU: each kernel's variants are verified and timed, the fastest kept",
    )
    optimize.add_argument(
        "--search-seconds",
        type=float,
        default=60.0,
        help="time budget per target of --search and of a model's answers (--model), in seconds (default 60)",
    )
    _search_cache_option(optimize)
    optimize.add_argument(
        "--gpus",
        type=_positive,
        default=1,
        help="with --search: measure each target's fragments on the first N GPUs of this host side by side (default "
        "1); a fragment's variants are all timed on one GPU, alone there",
    )
    optimize.add_argument(
        "--schedule",
        type=Path,
        help="decode this schedule script (see a report's kernel.schedule) instead of the compiler's default; needs --target",
    )

    _model_options(optimize)

    verify = commands.add_parser("verify", help="check a KernelBench-form candidate (ModelNew) against a task (Model)")
    verify.add_argument("task_file", type=Path)
    verify.add_argument("candidate_file", type=Path)
    _device_option(verify)
    _remote_options(verify)
    verify.add_argument("--json", type=Path, help="write the report as JSON")
    verify.add_argument("--trials", type=int, default=5, help="verification trials with fresh inputs (default 5)")

    bench = commands.add_parser(
        "bench",
        help="run every KernelBench-form problem in DIR through the pipeline; write results, a summary and charts",
    )
    bench.add_argument("directory", type=Path, metavar="DIR")
    _device_option(bench)
    _remote_options(bench)
    bench.add_argument("--out", type=Path, help="results folder (default: benchmarks/results/bench-DEVICE-DATE)")
    bench.add_argument("--limit", type=_positive, metavar="N", help="run only the first N problems (after --match)")
    bench.add_argument("--match", metavar="SUBSTRING", help="run only the problems whose path contains SUBSTRING")
    bench.add_argument("--trials", type=_positive, default=5, help="verification trials with fresh inputs (default 5)")
    bench.add_argument(
        "--search",
        action="store_true",
        help="run each problem with test-time search on the GPU, as `drtriton optimize --search` does",
    )
    bench.add_argument(
        "--search-seconds", type=float, default=60.0, help="time budget of --search per problem, in seconds (default 60)"
    )
    _search_cache_option(bench)
    bench.add_argument(
        "--max-autotune",
        action="store_true",
        help="also time torch.compile(mode='max-autotune'), the strongest baseline a user can turn on, and report "
        "both modes (off by default: it compiles for minutes per problem)",
    )
    bench.add_argument(
        "--jobs",
        type=_positive,
        default=1,
        help="problems at a time on each GPU (default 1): their verifications share it, each timing has it alone",
    )
    bench.add_argument(
        "--gpus",
        type=_positive,
        default=1,
        help="spread the problems over the first N GPUs of this host (default 1): each problem's workers see one GPU, "
        "and a timing never shares its GPU",
    )
    bench.add_argument(
        "--cluster",
        metavar="ADDRESS",
        help="run each problem as a task on a Ray cluster, with a whole GPU of a node to itself: ray://HEAD:PORT (Ray "
        "Client), HEAD:PORT or auto (this machine is a node), or local (a Ray of this machine's own); needs the "
        "cluster extra (pip install 'drtriton-lsp[cluster]') here and on every node",
    )
    bench.add_argument(
        "--resume",
        action="store_true",
        help="keep the problems already in OUT/results.json (same device) and run only the others",
    )

    _model_options(bench)

    commands.add_parser("worker", help="serve JSON-RPC jobs on stdin/stdout (used by drtriton itself)")
    return parser


def _search_cache_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--search-cache", type=Path, metavar="DIR",
        help="where --search keeps its results for the next run (default ~/.cache/drtriton/search); an empty folder "
        "makes every search start afresh",
    )


def _device_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--device",
        choices=["auto", "cpu", "cuda"],
        default="auto",
        help="auto: the GPU if the worker sees one, else the CPU with Triton's interpreter",
    )


def _model_options(parser: argparse.ArgumentParser) -> None:
    model = parser.add_argument_group("model", "a trained model writing candidates beside the compiler")
    model.add_argument(
        "--model",
        metavar="URL_OR_PATH",
        help="an OpenAI-compatible server's URL (e.g. http://localhost:8000/v1, as `vllm serve` starts) or a local "
        "checkpoint directory (loaded in a worker process, see --model-engine); its answers are verified and timed "
        "beside the compiler's, the fastest verified kept",
    )
    model.add_argument("--model-engine", choices=["transformers", "vllm"], default="transformers",
                       help="what samples a checkpoint directory: transformers (default) or vLLM's offline engine, in "
                       "a worker whose interpreter has vLLM (--model-python)")
    model.add_argument("--model-python", default="", metavar="PATH",
                       help="with --model-engine vllm: the Python interpreter whose environment has vLLM (default: the "
                       "workers' own; on a --remote host, the interpreter there)")
    model.add_argument("--model-kind", choices=["kernel", "script", "both"], default="kernel",
                       help="what the model writes: a ModelNew module, a schedule script, or both (default kernel)")
    model.add_argument("--samples", type=_positive, default=4, help="model answers per target and kind (default 4)")
    model.add_argument("--turns", type=int, default=1,
                       help="refinement turns: rejections and times go back to the model (default 1; 0: none)")
    model.add_argument("--unconstrained", action="store_true",
                       help="let a script-writing model write freely (default: its answers are held to the script "
                       "grammar while sampled; a server without vLLM's structured outputs is asked without it)")
    model.add_argument("--api-key-env", default="", metavar="NAME",
                       help="the environment variable holding the server's API key (the key is never stored)")


def model_settings(args: argparse.Namespace):
    """The --model options as ModelSettings: a URL is an OpenAI-compatible server, a directory a checkpoint."""
    from drtriton_lsp.models.settings import ModelSettings

    common = dict(kind=args.model_kind, samples=args.samples, turns=max(0, args.turns), apiKeyEnv=args.api_key_env,
                  constrained=not args.unconstrained, seconds=max(1, round(args.search_seconds)))
    if args.model is None:
        return ModelSettings()
    if args.model.startswith(("http://", "https://")):
        return ModelSettings(backend="openai", endpoint=args.model, **common)
    if Path(args.model).is_dir():
        return ModelSettings(backend=args.model_engine, path=args.model, python=args.model_python, **common)
    raise DrtritonError(
        f"--model {args.model} is neither a URL nor a directory",
        "pass an OpenAI-compatible server's URL (http://HOST:PORT/v1) or a checkpoint directory (save_pretrained)",
    )


def _remote_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--remote",
        type=_remote_address,
        metavar="ssh://[user@]host[:port]",
        help="run the workers on this host over ssh (a host alias from your ssh config works: ssh://gpu-box); "
        "drtriton must be installed there, see --remote-python",
    )
    parser.add_argument(
        "--remote-python",
        metavar="PATH",
        default="python3",
        help="with --remote: the remote python whose environment has drtriton installed (default python3)",
    )


def _remote_address(text: str) -> str:
    from drtriton_lsp.runners.ssh import REMOTE_FORM, remote_problem

    problem = remote_problem(text)
    if problem:
        raise argparse.ArgumentTypeError(f"{text!r} {problem}; write it as {REMOTE_FORM}, e.g. ssh://gpu-box")
    return text


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def optimize_command(args: argparse.Namespace, console: Console) -> int:
    from drtriton_lsp.engine.pipeline import OptimizeOptions, Outcome, optimize_target, provenance_text
    from drtriton_lsp.engine.report import one_line, to_markdown
    from drtriton_lsp.engine.search import SearchBudget
    from drtriton_lsp.engine.session import Cancelled, WorkerSession
    from drtriton_lsp.runners.choice import runner_for
    from drtriton_lsp.source.extract import targets_with_inputs
    from drtriton_lsp.source.files import read_source_file

    path = str(args.file)
    source_file = read_source_file(args.file)
    original = source_file.text
    names = [args.target] if args.target else choose_targets(targets_with_inputs(original, path), path)
    if args.write_test and not args.write:
        raise DrtritonError("--write-test writes a test for the kernels that --write writes, and --write is missing",
                            "add --write (or leave out --write-test)")
    if args.schedule and not args.target:
        raise DrtritonError(
            "--schedule applies to one target, and none was named",
            "add --target NAME (a script lists the ops of one target's graph)",
        )
    if args.gpus > 1 and not args.search:
        raise DrtritonError("--gpus spreads a search's fragments over GPUs, and --search is missing",
                            "add --search (or leave out --gpus)")
    if args.gpus > 1 and args.remote:
        raise DrtritonError("--gpus spreads the search over this machine's GPUs, and --remote runs it on another",
                            "leave out --gpus with --remote")
    schedule = read_source(args.schedule) if args.schedule else None
    options = OptimizeOptions(
        device=args.device,
        trials=args.trials,
        schedule=schedule,
        search=args.search,
        search_budget=SearchBudget(seconds=args.search_seconds),
        search_cache=args.search_cache,
        search_gpus=args.gpus,
        model=model_settings(args),
    )
    outcomes = []
    with runner_for(args.remote, args.remote_python) as runner:  # closing it kills a worker started ahead, unused
        for name in names:
            with progress_display(console, Text.assemble((name, "bold"), ": starting")) as status:

                def progress(message: str, _name=name, _status=status) -> None:
                    _status.update(Text.assemble((_name, "bold"), ": ", message))

                try:
                    session = WorkerSession.for_file(runner, path, progress=progress)
                    outcome = optimize_target(original, path, name, options=options, session=session)
                except Cancelled:
                    raise KeyboardInterrupt from None
                except DrtritonError as error:
                    if len(names) == 1:
                        raise
                    outcome = Outcome(error_report(path, name, error))  # one bad target must not stop the others
            outcomes.append(outcome)
            console.print(Text(one_line(outcome.report)), highlight=False)

    reports = [o.report for o in outcomes]
    print_reports(reports, console)
    if args.json:
        args.json.write_text(json.dumps(reports[0] if len(reports) == 1 else reports, indent=2) + "\n")
    if args.markdown:
        args.markdown.write_text("\n".join(to_markdown(r) for r in reports))
    if args.write:
        write_verified(source_file, outcomes, console, provenance_text, with_tests=args.write_test)
    return EXIT_OK if all(o.verified for o in outcomes) else EXIT_NOT_VERIFIED


def error_report(path: str, target: str, error: DrtritonError) -> dict[str, Any]:
    """A report with status "error" for a target that could not be processed (bad input)."""
    from drtriton_lsp.engine.report import SearchSection, build_report

    return build_report(
        file=path,
        target=target,
        status="error",
        device={"kind": "none", "name": "-"},
        verdict=None,
        timing=None,
        timing_note="not run",
        search=SearchSection(backend="compiler", candidates=0, verified=0, seconds=None),
        kernel_source=None,
        schedule=None,
        replaced_ops=[],
        kept_ops=[],
        message=f"{error.located()} ({error.hint})" if error.hint else error.located(),
    )


def choose_targets(availability: list[Any], path: str) -> list[str]:
    """Every target with example inputs; none is a bad-input error that says how to add them."""
    chosen = [entry.target.name for entry in availability if entry.available]
    if chosen:
        return chosen
    if not availability:
        raise DrtritonError("no nn.Module or torch function found", "drtriton optimizes classes deriving from nn.Module", path=path)
    first = availability[0]
    if len(availability) == 1 and first.problem is not None:
        raise first.problem
    raise DrtritonError(
        "no target has example inputs: " + ", ".join(entry.target.name for entry in availability),
        f"choose one with --target, and add a comment line '# drtriton: inputs = [torch.randn(...)]' "
        f"directly above it (e.g. above {first.target.name}, line {first.target.span.start_line}), "
        "or define get_inputs() and get_init_inputs()",
        path=path,
    )


def write_verified(source_file, outcomes, console: Console, provenance_text, *, with_tests: bool = False) -> None:
    """Apply every verified target's edit to the text we read; write only if the file still holds those bytes.

    with_tests: also write a regression test per kernel, each run against the new text first (nothing is
    written unless every one passes).
    """
    from drtriton_lsp.engine.pipeline import write_back_refusal
    from drtriton_lsp.engine.report import worth_writing_back
    from drtriton_lsp.source.extract import example_input_expressions
    from drtriton_lsp.source.files import replace_if_unchanged
    from drtriton_lsp.source.regression_test import check_regression_test, regression_test, write_regression_test
    from drtriton_lsp.source.writeback import write_back

    text = source_file.text
    written = []
    for outcome in outcomes:
        if not outcome.verified:
            say(console, "not written: ", "yellow", f"{outcome.report['target']} was not verified")
            continue
        if not worth_writing_back(outcome.report):
            timing = outcome.report["timing"]
            say(
                console,
                "not written: ",
                "yellow",
                f"{outcome.report['target']} is verified but slower than eager PyTorch "
                f"({timing['speedup_vs_eager']:.2f}x on {outcome.report['device']['name']}); the original stays",
            )
            continue
        if write_back_refusal(outcome):
            say(console, "not written: ", "yellow", f"{outcome.report['target']}: {write_back_refusal(outcome)}")
            continue
        text = write_back(text, outcome.report["target"], outcome.program, provenance_text(outcome), outcome.guards)
        written.append(outcome.report["target"])
    if not written:
        return
    new_bytes = source_file.encoded(text)
    tests = []
    if with_tests:
        for outcome in outcomes:
            target = outcome.report["target"]
            if target in written:
                inputs = example_input_expressions(source_file.text, target, str(source_file.path))
                tests.append(regression_test(source_file.path, target, outcome.task.kind, inputs, outcome.guards))
        for test in tests:
            say(console, "testing: ", "bold", f"running {test.path.name} against the new {source_file.path.name}")
            check_regression_test(test, source_file.path, new_bytes)
    replace_if_unchanged(source_file.path, source_file.raw, new_bytes)
    say(console, "wrote ", "green", f"{', '.join(written)} into {source_file.path}")
    for test in tests:
        write_regression_test(test)
        say(console, "wrote ", "green", f"{test.path} (it passed against the new file)")


def verify_command(args: argparse.Namespace, console: Console) -> int:
    from drtriton_lsp.engine.devices import describe_device, likely_device, resolve_device
    from drtriton_lsp.engine.report import SearchSection, build_report, one_line
    from drtriton_lsp.engine.session import Cancelled, WorkerLimits, WorkerSession
    from drtriton_lsp.engine.verify import verify_candidate, worker_environment
    from drtriton_lsp.runners.choice import runner_for
    from drtriton_lsp.runners.runner import JobFailure, JobLimits
    from drtriton_lsp.task import Task

    task = Task.from_file(args.task_file)
    candidate = read_source(args.candidate_file)
    runner = runner_for(args.remote, args.remote_python)
    with runner, progress_display(console, "checking the worker's devices") as status:
        session = WorkerSession.for_file(
            runner,
            str(args.task_file),
            limits=WorkerLimits(verify=JobLimits()),  # the judge gets the runner's default limits here
            progress=lambda message: status.update(f"verifying: {message}"),
        )
        try:
            # the verification's worker (on the likely device) starts while the devices are checked
            likely = likely_device(args.device, runner.host is not None)
            devices = runner.call(
                "capabilities", {}, python_path=session.python_path, prepare_next=worker_environment(likely)
            )
        except JobFailure as failure:
            return worker_did_not_start(console, failure)
        device = resolve_device(args.device, devices, str(args.task_file))
        try:
            verdict = verify_candidate(task, candidate, session=session, device=device, trials=args.trials)
        except Cancelled:
            raise KeyboardInterrupt from None
    report = build_report(
        file=str(args.candidate_file),
        target=args.task_file.stem,
        status="verified" if verdict.verified else "failed",
        device=describe_device(device, devices),
        verdict=verdict,
        timing=None,
        timing_note="drtriton verify checks correctness only",
        search=SearchSection(backend="external", candidates=1, verified=int(verdict.verified), seconds=None),
        kernel_source=candidate,
        schedule=None,
        replaced_ops=[],
        kept_ops=[],
        message="" if verdict.verified else verdict.explanation,
        versions=devices["versions"],
    )
    console.print(Text(one_line(report)), highlight=False)
    if args.json:
        args.json.write_text(json.dumps(report, indent=2) + "\n")
    return EXIT_OK if verdict.verified else EXIT_NOT_VERIFIED


def bench_command(args: argparse.Namespace, console: Console, argv: list[str]) -> int:
    """Run a directory of problems; SIGTERM (e.g. from `timeout`) stops it like Ctrl-C, keeping what is done."""
    import signal

    def stop_on_terminate(_signal, _frame):
        raise KeyboardInterrupt  # a `timeout` or a job manager stops the run like Ctrl-C: partial results kept

    previous_handler = signal.signal(signal.SIGTERM, stop_on_terminate)
    try:
        return _run_bench(args, console, argv)
    finally:
        signal.signal(signal.SIGTERM, previous_handler)


def _run_bench(args: argparse.Namespace, console: Console, argv: list[str]) -> int:
    check_bench_placement(args)
    with contextlib.ExitStack() as cluster:
        ray = None
        if args.cluster:
            from drtriton_lsp.runners.cluster import connected

            with progress_display(console, f"connecting to the Ray cluster at {args.cluster}"):
                ray = cluster.enter_context(connected(args.cluster))
        return _bench_on(args, console, argv, ray)


def check_bench_placement(args: argparse.Namespace) -> None:
    """Refuse placement options that do not go together (before anything starts)."""
    if args.cluster and (args.remote or args.jobs > 1 or args.gpus > 1):
        raise DrtritonError(
            "--cluster places the problems itself (one to a GPU of the cluster): it does not go with --remote, "
            "--jobs or --gpus",
            "leave those out with --cluster",
        )
    if args.remote and (args.jobs > 1 or args.gpus > 1):
        raise DrtritonError(
            "--jobs or --gpus above 1 with --remote is not supported: the problems' timings on the remote GPU would "
            "not be kept apart (the GPU lock that does it is a file on this machine)",
            "run with --jobs 1 and --gpus 1, or use a Ray cluster (--cluster)",
        )


def _bench_on(args: argparse.Namespace, console: Console, argv: list[str], ray) -> int:
    """`drtriton bench` with its problems on this host's workers (ray None) or on the connected Ray cluster."""
    import datetime
    import shlex

    from drtriton_lsp.bench.placement import local_places
    from drtriton_lsp.bench.suite import (
        git_commit,
        load_results,
        measure_copy_bandwidth,
        new_results,
        run_suite,
        select_problems,
    )
    from drtriton_lsp.bench.suite_report import progress_line, render_console_summary, write_results
    from drtriton_lsp.engine.devices import describe_device, resolve_device
    from drtriton_lsp.engine.gpus import check_gpu_count
    from drtriton_lsp.runners.choice import runner_for
    from drtriton_lsp.runners.local import LocalRunner
    from drtriton_lsp.runners.runner import JobFailure

    problems, skipped = select_problems(args.directory, args.match, args.limit)
    with progress_display(console, "checking the worker's devices") as status:
        copy_ceiling = None
        if ray is not None:
            from drtriton_lsp.bench.cluster import describe_cluster_device
            from drtriton_lsp.runners.cluster import cluster_gpus

            status.update("asking a node of the cluster what it has")
            probe = describe_cluster_device(
                ray, want_gpu=args.device != "cpu" and cluster_gpus(ray) > 0, measure_copy=args.device != "cpu"
            )
            devices = probe["devices"]
            device = resolve_device(args.device, devices, str(args.directory))
            copy_ceiling = probe["copy"] if device == "cuda" else None
        else:
            runner = runner_for(args.remote, args.remote_python)
            try:
                devices = runner.call("capabilities", {})
            except JobFailure as failure:
                return worker_did_not_start(console, failure)
            device = resolve_device(args.device, devices, str(args.directory))
            check_gpu_count(args.gpus, device, devices)
            if device == "cuda":
                status.update("measuring the copy bandwidth (the ceiling of memory-bound kernels)")
                copy_ceiling = measure_copy_bandwidth(runner, status.update)
        device_info = describe_device(device, devices)
        today = datetime.date.today().isoformat()
        out = args.out or Path("benchmarks") / "results" / f"bench-{device}-{today}"
        pipeline = bench_pipeline(args)
        if args.resume and (out / "results.json").exists():
            results = load_results(out / "results.json", device_info, pipeline)
        else:
            results = new_results(
                command=shlex.join(["drtriton", *argv]),
                commit=git_commit(args.directory),
                suite=str(args.directory),
                device=device_info,
                versions=devices["versions"],
                pipeline=pipeline,
            )
        results["skipped_files"] = skipped
        if copy_ceiling:
            measured = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
            results["copy_bandwidth"].append({**copy_ceiling, "measured": measured})
    done = len({record["problem"] for record in results["problems"]} & {problem.name for problem in problems})
    where = f"the Ray cluster at {args.cluster}" if ray is not None else device_info["name"]
    if args.gpus > 1:
        where += f" x {args.gpus}"
    say(console, "bench: ", "bold", f"{len(problems) - done} problems from {args.directory} on {where}, "
        f"results in {out}" + (f" ({done} already there)" if done else ""))
    if device == "cpu":
        say(console, "no GPU: ", "yellow", "every problem is verified under the Triton interpreter at reduced sizes; "
            "no speed is measured")
    if copy_ceiling:
        say(console, "copy bandwidth: ", "bold", f"{copy_ceiling['gb_per_s']:.0f} GB/s (1 GiB device-to-device copy)")

    with contextlib.ExitStack() as placed:
        if ray is not None:
            from drtriton_lsp.bench.cluster import RayPlaces

            places = RayPlaces(ray, args.cluster, device, len(problems) - done)
        else:
            places = placed.enter_context(local_places(
                lambda env: runner_for(args.remote, args.remote_python) if args.remote else LocalRunner(extra_env=env),
                gpus=args.gpus,
                jobs=args.jobs,
                gpu_memory_bytes=devices.get("cuda_memory_bytes") if device == "cuda" else None,
                share_cpus=device == "cuda" and not args.remote,
            ))
        with progress_display(console, "starting") as running:
            finished = run_suite(
                problems,
                results,
                bench_options(args, device),
                copy_ceiling,
                save=lambda document: write_results(document, out),
                on_progress=lambda number, total, problem, message: running.update(
                    Text.assemble(f"[{number}/{total}] ", (problem.name, "bold"), ": ", message)
                ),
                on_done=lambda number, total, record: console.print(
                    Text(progress_line(number, total, record)), highlight=False
                ),
                places=places,
            )
    console.print(Markdown(render_console_summary(results)))
    say(console, "wrote ", "green", f"{out}: results.md, results.json, speedup.svg, roofline.svg")
    if not finished:
        console.print("[yellow]interrupted: the results so far are written; run again with --resume to go on[/]")
        return EXIT_INTERRUPTED
    selected = {problem.name for problem in problems}
    chosen = [record for record in results["problems"] if record["problem"] in selected]
    return EXIT_OK if all(record["status"] == "verified" for record in chosen) else EXIT_NOT_VERIFIED


def worker_did_not_start(console: Console, failure) -> int:
    """Say why the first worker did not answer: a remote that cannot be reached or used is the user's to fix (bad
    input); a local worker that fails to start is an internal error."""
    if failure.runner_fault:
        say(console, "error: ", "bold red", failure.detail)
        say(console, "what to do: ", "yellow", failure.hint)
        return EXIT_BAD_INPUT
    say(console, "internal error: ", "bold red", f"the worker did not start: {failure.detail}\n{failure.stderr_tail}")
    return EXIT_INTERNAL


def bench_options(args: argparse.Namespace, device: str):
    """The pipeline options each problem of `drtriton bench` runs with."""
    from drtriton_lsp.engine.pipeline import OptimizeOptions
    from drtriton_lsp.engine.search import SearchBudget

    return OptimizeOptions(
        device=device,
        trials=args.trials,
        search=args.search,
        search_budget=SearchBudget(seconds=args.search_seconds),
        search_cache=args.search_cache,
        compile_max_autotune=args.max_autotune,
        model=model_settings(args),
    )


def bench_pipeline(args: argparse.Namespace) -> dict[str, Any]:
    """The bench's pipeline settings, as results.json records them (a resumed run must match them); max_autotune
    and the model only when on, so that runs from before the options resume as they were."""
    pipeline: dict[str, Any] = {
        "trials": args.trials,
        "search": args.search,
        "search_seconds": args.search_seconds if args.search else None,
    }
    if args.max_autotune:
        pipeline["max_autotune"] = True
    if args.model:
        pipeline["model"] = {
            "model": args.model, "kind": args.model_kind, "samples": args.samples, "turns": args.turns,
            "constrained": not args.unconstrained,
        }
        if args.model_engine != "transformers":
            pipeline["model"]["engine"] = args.model_engine
    return pipeline


def print_reports(reports: list[dict[str, Any]], console: Console) -> None:
    from drtriton_lsp.engine.report import to_markdown

    for report in reports:
        console.print(Markdown(to_markdown(report)))


def read_source(path: Path) -> str:
    """A UTF-8 file's text, line endings kept, without a byte order mark."""
    from drtriton_lsp.source.files import read_source_file

    return read_source_file(path).text


if __name__ == "__main__":
    sys.exit(main())
