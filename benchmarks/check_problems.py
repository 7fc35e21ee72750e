"""Check a folder of KernelBench-form problems on a CPU: each runs in eager with its size constants shrunk, then is
captured at full size as the pipeline's capture worker does and compiled with the default schedule; prints per
problem what failed and why, and whether the default replays the forward as a CUDA graph with the times it weighed
(no verification, no kernels run).

Usage: python benchmarks/check_problems.py benchmarks/problems/models [--match NAME] [--json OUT] [--no-export]
Full-size capture allocates each problem's real inputs and weights (up to about 1 GB each), one problem at a time.
"""

from __future__ import annotations

import argparse
import importlib.util
import inspect
import json
import math
import sys
import time
import traceback
import types
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from drtriton_lsp.bench.suite import find_problems  # noqa: E402
from drtriton_lsp.compiler.codegen import compile_graph  # noqa: E402
from drtriton_lsp.compiler.planner import replay_estimate  # noqa: E402
from drtriton_lsp.compiler.script import parse_schedule  # noqa: E402
from drtriton_lsp.errors import DrtritonError  # noqa: E402
from drtriton_lsp.worker.capture import capture  # noqa: E402

# Size constants at or above SHRINK_FROM are divided by SHRINK_FACTOR for the eager check; smaller ones (kernel
# sizes, strides, head and group counts, batch sizes) keep their values, so divisibility between them survives.
SHRINK_FROM = 48
SHRINK_FACTOR = 8


def load_problem(path: Path) -> types.ModuleType:
    """Import a problem file as a fresh module (a new name per load, so shrinking one copy leaves others alone)."""
    name = f"problem_{path.stem}_{time.monotonic_ns()}"
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def size_constants(module: types.ModuleType) -> dict[str, int]:
    """The module's upper-case integer constants (its sizes), by name."""
    return {
        name: value
        for name, value in vars(module).items()
        if name.isupper() and isinstance(value, int) and not isinstance(value, bool)
    }


def shrink(module: types.ModuleType) -> dict[str, int]:
    """Divide the module's large size constants in place; returns the new values of those changed.

    get_inputs() and get_init_inputs() read the constants when called, so they then build a small problem.
    """
    changed = {}
    for name, value in size_constants(module).items():
        if value >= SHRINK_FROM:
            changed[name] = max(value // SHRINK_FACTOR, 1)
            setattr(module, name, changed[name])
    return changed


def build(module: types.ModuleType, seed: int = 0) -> tuple[torch.nn.Module, list[Any]]:
    """`Model(*get_init_inputs())` in eval mode and one `get_inputs()` draw, seeded as the capture worker seeds them."""
    torch.manual_seed(seed)
    model = module.Model(*module.get_init_inputs()).eval()
    torch.manual_seed(seed)
    return model, list(module.get_inputs())


def floating_dtypes(model: torch.nn.Module, inputs: list[Any]) -> list[str]:
    """The floating-point dtypes of the inputs and weights (what the problem computes in)."""
    tensors = [*model.parameters(), *model.buffers(), *(v for v in inputs if isinstance(v, torch.Tensor))]
    return sorted({str(t.dtype).removeprefix("torch.") for t in tensors if t.is_floating_point()})


def tensor_megabytes(values: Any) -> float:
    """Bytes of the tensors among `values` in MB; a symbolic size (export's fake outputs) counts at its example."""
    tensors = [v for v in (values if isinstance(values, (list, tuple)) else [values]) if isinstance(v, torch.Tensor)]
    return sum(math.prod(_example_size(d) for d in t.shape) * t.element_size() for t in tensors) / 1e6


def _example_size(dimension: int | torch.SymInt) -> int:
    return int(dimension.node.hint) if isinstance(dimension, torch.SymInt) else int(dimension)


def first_line(error: BaseException) -> str:
    text = str(error).strip()
    return f"{type(error).__name__}: {text.splitlines()[0] if text else ''}"[:400]


def is_in_place(op: str) -> bool:
    """An aten op whose overload packet ends in "_" (relu_, add_): it writes into its first argument."""
    parts = op.split(".")
    return len(parts) == 3 and parts[0] == "aten" and parts[1].endswith("_") and not parts[1].startswith("_")


def export_at_full_size(path: Path) -> dict[str, Any]:
    """Export with every input dimension free (Dim.AUTO, the pipeline's first attempt), then capture as the
    pipeline does (in-place ops on fresh values functionalised, falling back to static shapes); records both outcomes,
    the capture's note, and the in-place ops the graph still holds."""
    module = load_problem(path)
    model, inputs = build(module)
    record: dict[str, Any] = {
        "input_mb": round(tensor_megabytes(inputs), 1),
        "parameter_mb": round(
            sum(t.numel() * t.element_size() for t in [*model.parameters(), *model.buffers()]) / 1e6, 1
        ),
    }
    dynamic_shapes = tuple(
        {axis: torch.export.Dim.AUTO for axis in range(value.dim())} if isinstance(value, torch.Tensor) else None
        for value in inputs
    )
    with torch.no_grad():
        try:
            exported = torch.export.export(model, tuple(inputs), dynamic_shapes=dynamic_shapes, strict=False)
            outputs = [node.meta.get("val") for node in exported.graph.output_node().args[0]]
            record["output_mb"] = round(tensor_megabytes(outputs), 1)
            record["dynamic_export"] = "ok"
        except Exception as error:  # noqa: BLE001 - every failure is what this check reports
            record["dynamic_export"] = first_line(error)
        try:
            captured = capture(model, tuple(inputs), path)
        except DrtritonError as error:
            record["capture"] = error.message
            return record
        except Exception as error:  # noqa: BLE001 - a failure outside CaptureError is a finding too
            record["capture"] = "unexpected " + first_line(error)
            return record
    graph = captured.graph
    record["capture"] = "ok"
    record["capture_note"] = captured.static_note
    record["graph_ops"] = len(graph.nodes)
    record["graph_inputs"] = [graph_input.name for graph_input in graph.inputs if graph_input.kind == "user_input"]
    record["in_place_ops"] = sorted({node.op for node in graph.nodes if is_in_place(node.op)})
    record["free_symbols"] = sorted(graph.symbol_hints)
    record.update(generate(graph, module))
    return record


def generate(graph: Any, module: types.ModuleType) -> dict[str, Any]:
    """The compiler's default schedule for the graph, as `drtriton optimize` generates it before verifying."""
    forward_params = list(inspect.signature(module.Model.forward).parameters)[1:]
    try:
        program = compile_graph(graph, prefix="model", forward_params=forward_params, has_self=True)
    except Exception as error:  # noqa: BLE001 - a generation failure is a finding
        return {"generate": first_line(error)}
    steps = parse_schedule(program.schedule).steps
    estimate = replay_estimate(steps, graph)
    return {
        "generate": "ok" if program.kernels else "no kernel (no_candidate)",
        "kernels": len(program.kernels),
        "steps": len(steps),
        # the default's CUDA-graph replay and what it weighed (planner.replays_by_default), microseconds a call
        "replay": program.replay,
        "replay_estimate_us": {
            name.removesuffix("_s"): round(seconds * 1e6) for name, seconds in vars(estimate).items()
        },
        "replaced_ops": sorted(set(program.replaced_ops)),
        "kept_ops": sorted(set(program.kept_ops)),
        "kept_copies": sorted(set(program.kept_copies)),
        # the whole default script, to compare two commits' schedules problem by problem
        "schedule": program.schedule,
    }


def check(path: Path, export: bool) -> dict[str, Any]:
    module = load_problem(path)
    record: dict[str, Any] = {"category": getattr(module, "CATEGORY", None), "sizes": size_constants(module)}
    shrink(module)
    started = time.perf_counter()
    try:
        model, inputs = build(module)
        record["dtypes"] = floating_dtypes(model, inputs)
        with torch.no_grad():
            model(*inputs)
        record["eager_reduced"] = "ok"
    except Exception as error:  # noqa: BLE001 - reported per problem
        record["eager_reduced"] = first_line(error)
        record["traceback"] = traceback.format_exc(limit=-3)
    record["eager_reduced_s"] = round(time.perf_counter() - started, 2)
    if export:
        started = time.perf_counter()
        record.update(export_at_full_size(path))
        record["export_s"] = round(time.perf_counter() - started, 1)
    return record


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    parser.add_argument("--match", help="only problems whose name contains this")
    parser.add_argument("--json", type=Path, help="write every record here")
    parser.add_argument("--no-export", action="store_true", help="only the reduced-size eager run")
    arguments = parser.parse_args()
    problems, _skipped = find_problems(arguments.directory)
    records = {}
    for problem in problems:
        if arguments.match and arguments.match not in problem.name:
            continue
        record = check(problem.path, export=not arguments.no_export)
        records[problem.name] = record
        keys = ("category", "eager_reduced", "dynamic_export", "capture", "generate", "kernels", "replay",
                "replay_estimate_us")
        print(problem.name, json.dumps({key: record.get(key) for key in keys}), flush=True)
        if arguments.json:
            arguments.json.write_text(json.dumps(records, indent=1))
    return 0 if all(r["eager_reduced"] == "ok" and r.get("capture", "ok") == "ok" for r in records.values()) else 1


if __name__ == "__main__":
    raise SystemExit(main())
