"""Same-call A/B of the matmul template's operand loads on whole problems: the default schedule (TMA descriptor loads
and their tile where the template chooses them), the same with pointer loads, and pointer loads with the tile the
template used before descriptors (128x256x64, 8 warps, 3 stages).

Each variant's hybrid forward is compiled from the problem's captured graph, checked against eager PyTorch, and timed
with triton.testing.do_bench (L2 cleared before each call, medians) in one process, so the variants compare on one
machine at one time. Usage (GPU): `python benchmarks/matmul_loads_ab.py PROBLEM.py [PROBLEM.py ...]`.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import sys
import tempfile
import warnings
from pathlib import Path

import torch
import triton

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.planner import default_schedule
from drtriton_lsp.compiler.script import print_schedule
from drtriton_lsp.compiler.templates import matmul
from drtriton_lsp.worker.capture import capture_graph

PREVIOUS_TILE = "tile=128x256x64 group=8 warps=8 stages=3"


def load_problem(path: Path):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def load_program(program, directory: Path, name: str):
    path = directory / f"{name}.py"
    path.write_text("\n".join(program.required_imports) + "\n\n\n" + program.kernel_block)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return getattr(module, program.forward_function)


def variants(graph, params) -> dict[str, object]:
    """name -> compiled program."""
    text = print_schedule(default_schedule(graph))
    programs = {"default (descriptors where chosen)": compile_graph(graph, prefix="model", forward_params=params, has_self=True)}
    saved = matmul.DESCRIPTOR_FLOPS
    matmul.DESCRIPTOR_FLOPS = float("inf")
    try:
        programs["pointer loads, same tiles"] = compile_graph(
            graph, prefix="model", forward_params=params, has_self=True, schedule=text
        )
        previous = re.sub(r"tile=\S+ group=\d+ warps=\d+ stages=\d+", PREVIOUS_TILE, text)
        programs["pointer loads, 128x256x64 w8 s3"] = compile_graph(
            graph, prefix="model", forward_params=params, has_self=True, schedule=previous
        )
    finally:
        matmul.DESCRIPTOR_FLOPS = saved
    programs["descriptors, 128x256x64 w8 s3"] = compile_graph(
        graph, prefix="model", forward_params=params, has_self=True, schedule=previous
    )
    return programs


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, help="write the measurements as JSON")
    args = parser.parse_args()
    directory = Path(tempfile.mkdtemp())
    results = {}
    for number, path in enumerate(args.problems):
        problem = load_problem(path)
        torch.manual_seed(0)
        model = problem.Model(*problem.get_init_inputs()).eval().cuda()
        inputs = [value.cuda() if isinstance(value, torch.Tensor) else value for value in problem.get_inputs()]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            graph = capture_graph(model, tuple(inputs))
        params = [graph_input.target for graph_input in graph.inputs if graph_input.kind == "user_input"]
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
        results[path.name] = rows
        print(f"\n### {path.name}\n\n| variant | ms | max abs error vs eager |\n|---|---|---|")
        for name, row in rows.items():
            print(f"| {name} | {row['ms']:.4f} | {row.get('max_abs_error', 0):.2e} |")
    if args.out:
        args.out.write_text(json.dumps({"torch": torch.__version__, "triton": triton.__version__,
                                        "device": torch.cuda.get_device_name(), "results": results}, indent=1))


if __name__ == "__main__":
    main()
