"""Same-process A/B of schedule variants on whole problems: the default schedule, and each variant written as regex
edits of its lines, compiled from the problem's graph captured on the GPU, checked against eager and timed beside
eager and torch.compile (triton.testing.do_bench, L2 cleared before each call, medians), with `--profile` listing
each one's kernels by device time (torch.profiler, as benchmarks/kernel_profile.py).

Usage (GPU): `python benchmarks/schedule_ab.py --variants V.json [--profile] [--out R.json]`, where V.json maps a
problem file to {variant name: [[pattern, replacement], ...]}; each pair is `re.sub(pattern, replacement, line)` on
every line of the default schedule (multiline mode, so `^` and `$` anchor at lines). A variant that does not
compile, or gives a wrong result, is reported with its error and not timed.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import traceback
from pathlib import Path

import torch
import triton

from drtriton_lsp.compiler.planner import default_schedule
from drtriton_lsp.compiler.script import print_schedule
from kernel_profile import kernel_table
from matmul_loads_ab import PROFILED_KERNELS, captured_on_gpu, compile_script, load_program

# the largest error a variant may show against eager, relative to eager's output scale, before it is not timed
TOLERATED_ERROR = 5e-2


def edited(script: str, edits: list[list[str]]) -> str:
    """The schedule with every (pattern, replacement) applied in order; a pattern that matches no line is an error."""
    for pattern, replacement in edits:
        script, count = re.subn(pattern, replacement, script, flags=re.MULTILINE)
        if not count:
            raise ValueError(f"the edit {pattern!r} -> {replacement!r} matches no line of the schedule")
    return script


def largest_error(actual, expected) -> float:
    """Max absolute difference over the outputs, relative to the largest magnitude eager returned."""
    pairs = zip(actual, expected) if isinstance(expected, (tuple, list)) else [(actual, expected)]
    error, scale = 0.0, 0.0
    for got, want in pairs:
        error = max(error, (got.float() - want.float()).abs().max().item())
        scale = max(scale, want.float().abs().max().item())
    return error / max(scale, 1e-6)


def measure_problem(
    path: Path, variant_edits: dict[str, list[list[str]]], directory: Path, profile: bool, with_compile: bool = True
) -> dict:
    """Rows of eager, torch.compile (unless with_compile is False), the default schedule and every variant for the
    problem at `path`."""
    model, inputs, graph, params = captured_on_gpu(path, f"problem_{path.stem}")
    default = print_schedule(default_schedule(graph))
    rows: dict[str, dict] = {}
    with torch.no_grad():
        expected = model(*inputs)
        baselines = {"eager": model, **({"torch.compile": torch.compile(model)} if with_compile else {})}
        for name, callable_model in baselines.items():
            rows[name] = {"ms": triton.testing.do_bench(lambda: callable_model(*inputs), return_mode="median")}
            if profile:
                rows[name]["kernels"] = kernel_table(callable_model, inputs)
        for index, (name, edits) in enumerate({"default": [], **variant_edits}.items()):
            row = rows[name] = {}
            try:
                script = edited(default, edits)
                program = compile_script(graph, params, script)
                forward = load_program(program, directory, f"{path.stem}_{index}")
                row["schedule"] = program.schedule
                row["relative_error"] = largest_error(forward(model, *inputs), expected)
                if row["relative_error"] > TOLERATED_ERROR:
                    raise AssertionError(f"wrong result: error {row['relative_error']:.2e} of eager's scale")
                row["ms"] = triton.testing.do_bench(lambda: forward(model, *inputs), return_mode="median")
                if profile:
                    row["kernels"] = kernel_table(lambda *values: forward(model, *values), inputs)
            except Exception as error:  # noqa: BLE001 - a variant's failure is a result of the A/B
                row["error"] = "".join(traceback.format_exception_only(error)).strip()[-600:]
    return rows


def print_rows(problem: str, rows: dict[str, dict]) -> None:
    """A markdown table of the problem's rows, then each profiled row's longest kernels."""
    compiled = rows.get("torch.compile", rows["eager"])["ms"]
    baseline = "torch.compile" if "torch.compile" in rows else "eager"
    print(f"\n### {problem}\n\n| variant | ms | vs {baseline} | relative error |\n|---|---|---|---|")
    for name, row in rows.items():
        if "error" in row:
            print(f"| {name} | - | - | {row['error'].splitlines()[-1][:160]} |")
        else:
            print(f"| {name} | {row['ms']:.4f} | {compiled / row['ms']:.2f}x | {row.get('relative_error', 0):.1e} |")
    for name, row in rows.items():
        if "schedule" in row:
            print(f"\n{name}:\n```\n{row['schedule']}```")
        if "kernels" in row:
            print(f"\n{name}: {row['kernels']['total_us']:.1f} us of device time per call\n")
            print("| kernel | launches | us per call |\n|---|---|---|")
            for kernel in row["kernels"]["kernels"][:PROFILED_KERNELS]:
                print(f"| `{kernel['kernel'][:90]}` | {kernel['launches_per_call']:g} | {kernel['us_per_call']:.1f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", type=Path, required=True, help="JSON: problem file -> {name: [[pattern, repl]]}")
    parser.add_argument("--out", type=Path, help="write the measurements as JSON")
    parser.add_argument("--profile", action="store_true", help="also list each row's kernels by device time")
    parser.add_argument("--no-compile", action="store_true", help="leave torch.compile out (compare with eager)")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp())
    results = {}
    for problem, variant_edits in json.loads(args.variants.read_text()).items():
        results[problem] = measure_problem(Path(problem), variant_edits, directory, args.profile, not args.no_compile)
        print_rows(problem, results[problem])
        if args.out:
            args.out.write_text(json.dumps({"torch": torch.__version__, "triton": triton.__version__,
                                            "device": torch.cuda.get_device_name(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
