"""Same-call A/B of the matmul template's operand loads on whole problems: the default schedule (pointer loads), the same
with `loads=descriptors` (TMA), and both with 128x128x64 tiles, 4 warps and 4 stages (the best descriptor tile on plain
linear layers in benchmarks/matmul_variants.py).

Each variant's hybrid forward is compiled from the problem's captured graph, checked against eager PyTorch, and timed
with triton.testing.do_bench (L2 cleared before each call, medians) in one process, so the variants compare on one
machine at one time; `--profile` also lists each variant's kernels by device time (torch.profiler, as
benchmarks/kernel_profile.py). Usage (GPU): `python benchmarks/matmul_loads_ab.py PROBLEM.py [PROBLEM.py ...]`.
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import warnings
from pathlib import Path

import torch
import triton

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.errors import ScheduleError
from drtriton_lsp.compiler.planner import default_schedule
from drtriton_lsp.compiler.script import print_schedule
from drtriton_lsp.worker.capture import capture_graph
from kernel_profile import import_file, kernel_table

SMALLER_TILE = "tile=128x128x64 group=8 warps=4 stages=4"
PROFILED_KERNELS = 12  # the longest kernels of a variant that --profile lists


def load_program(program, directory: Path, name: str):
    """The program's forward function, imported from a file (Triton reads a kernel's source from its file)."""
    path = directory / f"{name}.py"
    path.write_text("\n".join(program.required_imports) + "\n\n\n" + program.kernel_block)
    return getattr(import_file(path, name), program.forward_function)


def captured_on_gpu(path: Path, name: str):
    """The problem at `path` on the GPU (seed 0): (model, inputs, its captured graph, the forward's parameters)."""
    problem = import_file(path, name)
    torch.manual_seed(0)
    model = problem.Model(*problem.get_init_inputs()).eval().cuda()
    inputs = [value.cuda() if isinstance(value, torch.Tensor) else value for value in problem.get_inputs()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = capture_graph(model, tuple(inputs))
    params = [graph_input.target for graph_input in graph.inputs if graph_input.kind == "user_input"]
    return model, inputs, graph, params


def variants(graph, params) -> dict[str, object]:
    """name -> compiled program: the matmul lines of the default schedule rewritten."""
    default = print_schedule(default_schedule(graph))
    smaller = re.sub(r"(kernel matmul \S+) tile=\S+ group=\d+ warps=\d+ stages=\d+", rf"\1 {SMALLER_TILE}", default)
    scripts = {
        "default (pointer loads)": default,
        "loads=descriptors": with_descriptor_loads(graph, params, default),
        "pointer loads, 128x128x64 w4 s4": smaller,
        "loads=descriptors, 128x128x64 w4 s4": with_descriptor_loads(graph, params, smaller),
    }
    return {name: compile_script(graph, params, script) for name, script in scripts.items()}


def compile_script(graph, params, script: str):
    return compile_graph(graph, prefix="model", forward_params=params, has_self=True, schedule=script)


def with_descriptor_loads(graph, params, script: str) -> str:
    """`script` with loads=descriptors on every matmul line that takes it (a batched product does not)."""
    lines = script.splitlines()
    for number, line in enumerate(lines):
        if "loads=pointers" in line:
            trial = lines[:number] + [line.replace("loads=pointers", "loads=descriptors")] + lines[number + 1 :]
            try:
                compile_script(graph, params, "\n".join(trial) + "\n")
            except ScheduleError:
                continue
            lines = trial
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, help="write the measurements as JSON")
    parser.add_argument("--profile", action="store_true", help="also list each variant's kernels by device time")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp())
    results = {}
    for number, path in enumerate(args.problems):
        model, inputs, graph, params = captured_on_gpu(path, f"problem_{number}")
        rows = {}
        with torch.no_grad():
            expected = model(*inputs)
            rows["eager"] = {"ms": triton.testing.do_bench(lambda: model(*inputs), return_mode="median")}
            for index, (name, program) in enumerate(variants(graph, params).items()):
                forward = load_program(program, directory, f"variant_{number}_{index}")
                actual = forward(model, *inputs)
                pairs = zip(actual, expected) if isinstance(expected, tuple) else [(actual, expected)]
                error = max((got.float() - want.float()).abs().max().item() for got, want in pairs)
                rows[name] = {
                    "ms": triton.testing.do_bench(lambda: forward(model, *inputs), return_mode="median"),
                    "max_abs_error": error,
                    "schedule": program.schedule,
                }
                if args.profile:
                    rows[name]["kernels"] = kernel_table(lambda *values: forward(model, *values), inputs)
        results[path.name] = rows
        print(f"\n### {path.name}\n\n| variant | ms | max abs error vs eager |\n|---|---|---|")
        for name, row in rows.items():
            print(f"| {name} | {row['ms']:.4f} | {row.get('max_abs_error', 0):.2e} |")
        for name, row in rows.items():
            if "kernels" in row:
                print(f"\n{name}: {row['kernels']['total_us']:.1f} us of device time per call\n")
                print("| kernel | launches | us per call |\n|---|---|---|")
                for kernel in row["kernels"]["kernels"][:PROFILED_KERNELS]:
                    print(f"| `{kernel['kernel'][:90]}` | {kernel['launches_per_call']:g} | {kernel['us_per_call']:.1f} |")
    if args.out:
        args.out.write_text(json.dumps({"torch": torch.__version__, "triton": triton.__version__,
                                        "device": torch.cuda.get_device_name(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
