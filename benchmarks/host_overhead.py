"""Where a written-back module's time goes on the host: the dispatch's guards, the hybrid forward's launches, the GPU.

Takes the report of a `drtriton optimize --json` run (its kernel.source is the written-back module) and times, per call,
eager PyTorch, the written-back Model (guards + hybrid forward), the guards alone (the hybrid swapped for a no-op), the
hybrid forward alone (called without the guards: given the module tensors as the dispatch gives them, and reading them
itself), and that forward replayed as a CUDA graph (an experiment): host time to enqueue a few calls (fewer launches
than CUDA's queue holds, so the GPU never throttles it) and device time of calls queued back to back.

Usage (GPU): `PYTHONPATH=$PWD python benchmarks/host_overhead.py REPORT.json [REPORT.json ...]`; with `--device cpu`
(no GPU: kernels would run under Triton's interpreter) only the guards are timed, on CPU tensors.
"""

from __future__ import annotations

import argparse
import importlib.util
import itertools
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

ENQUEUED_CALLS = 16  # calls whose launches fit CUDA's queue, so enqueueing them measures the host alone
REPEATS = 15


def load_written_module(report_path: Path, replace_forward: str | None = None):
    """The report's written-back module, imported from a file (Triton reads kernels' source from their file);
    replace_forward: Python source of a function to dispatch to instead of the hybrid forward."""
    report = json.loads(report_path.read_text())
    source = report["kernel"]["source"]
    if replace_forward is not None:
        marker = "@drtriton_dispatch("
        start = source.index(marker) + len(marker)
        end = source.index(",", start)
        source = source[:start] + replace_forward + source[end:]
    path = Path(tempfile.mkdtemp()) / f"written_{report_path.stem}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def host_us(call, synchronize=torch.cuda.synchronize) -> float:
    """Median host microseconds per call to enqueue ENQUEUED_CALLS calls on an idle GPU."""
    samples = []
    for _ in range(REPEATS):
        synchronize()
        started = time.perf_counter()
        for _ in range(ENQUEUED_CALLS):
            call()
        samples.append((time.perf_counter() - started) / ENQUEUED_CALLS * 1e6)
        synchronize()
    return statistics.median(samples)


def measure_guards_on_cpu(report_path: Path) -> dict:
    """The guards alone on CPU tensors (the dispatch runs the kernels' stand-in there under TRITON_INTERPRET=1)."""
    guards_only = load_written_module(report_path, replace_forward="lambda self, *arguments, **keywords: None")
    init = guards_only.get_init_inputs() if hasattr(guards_only, "get_init_inputs") else []
    model = guards_only.Model(*init).eval()
    inputs = guards_only.get_inputs()
    with torch.no_grad():
        for _ in range(5):
            model(*inputs)
        return {"report": str(report_path), "rows": {"guards alone": {
            "host_us": host_us(lambda: model(*inputs), synchronize=lambda: None), "device_ms": None}}}


def device_ms(call) -> float:
    """Median milliseconds per call of calls queued back to back (CUDA events around 20 calls)."""
    samples = []
    for _ in range(REPEATS):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for _ in range(20):
            call()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / 20)
    return statistics.median(samples)


def graphed(forward, model, inputs: list):
    """`forward(model, *inputs)` replayed as one CUDA graph (an experiment for the host-side lever, not the product):
    inputs copied into the graph's own buffers, outputs copied out, so a returned tensor is never overwritten."""
    static_inputs = [value.clone() if isinstance(value, torch.Tensor) else value for value in inputs]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(3):
            forward(model, *static_inputs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        static_outputs = forward(model, *static_inputs)

    def replay():
        for static, value in zip(static_inputs, inputs):
            if isinstance(static, torch.Tensor):
                static.copy_(value)
        graph.replay()
        if isinstance(static_outputs, torch.Tensor):
            return static_outputs.clone()
        return tuple(output.clone() for output in static_outputs)

    return replay


def measure(report_path: Path) -> dict:
    written = load_written_module(report_path)
    guards_only = load_written_module(report_path, replace_forward="lambda self, *arguments, **keywords: None")
    init = written.get_init_inputs() if hasattr(written, "get_init_inputs") else []
    torch.manual_seed(0)
    model = written.Model(*init).eval().cuda()
    guard_model = guards_only.Model(*init).eval().cuda()
    guard_model.load_state_dict(model.state_dict())
    inputs = [value.cuda() if isinstance(value, torch.Tensor) else value for value in written.get_inputs()]
    hybrid = next(getattr(written, name) for name in dir(written) if name.endswith("_triton_forward"))
    module_tensors = dict(itertools.chain(model.named_parameters(), model.named_buffers()))
    calls = {
        "eager": lambda: written.Model.forward.reference(model, *inputs),
        "written-back Model (guards + hybrid)": lambda: model(*inputs),
        "guards alone": lambda: guard_model(*inputs),
        # as the dispatch calls it, with the module tensors its guards read; and called directly, reading them itself
        "hybrid forward alone": lambda: hybrid(model, *inputs, drtriton_module_tensors=module_tensors),
        "hybrid forward alone, reading its module tensors": lambda: hybrid(model, *inputs),
    }
    rows = {}
    with torch.no_grad():
        try:
            calls["hybrid forward in a CUDA graph (inputs copied in, outputs copied out)"] = graphed(hybrid, model, inputs)
        except Exception as failure:  # a forward that cannot be captured is reported, not fatal
            rows["hybrid forward in a CUDA graph"] = {"error": f"{type(failure).__name__}: {failure}"[:200]}
        for call in calls.values():
            for _ in range(5):
                call()
        for name, call in calls.items():
            rows[name] = {"host_us": host_us(call), "device_ms": device_ms(call) if name != "guards alone" else None}
    kernels = sum(1 for line in json.loads(report_path.read_text())["kernel"]["source"].splitlines()
                  if line.strip().endswith("](") and "[grid" in line)
    return {"report": str(report_path), "launch_sites": kernels, "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("reports", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, help="write the measurements as JSON")
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                        help="cpu: time the guards alone (set TRITON_INTERPRET=1)")
    arguments = parser.parse_args()
    if arguments.device == "cpu" and os.environ.get("TRITON_INTERPRET") != "1":
        # without it the dispatch sends CPU calls to the original code, and the guards would not be what is timed
        parser.error("--device cpu times the guards under Triton's interpreter: run with TRITON_INTERPRET=1")
    results = []
    for report_path in arguments.reports:
        result = measure(report_path) if arguments.device == "cuda" else measure_guards_on_cpu(report_path)
        results.append(result)
        print(f"\n### {report_path.stem} ({result.get('launch_sites', '-')} Triton launch sites in the source)\n")
        print("| call | host us per call | device ms per call |\n|---|---|---|")
        for name, row in result["rows"].items():
            if "error" in row:
                print(f"| {name} | {row['error']} | |")
                continue
            device = "-" if row["device_ms"] is None else f"{row['device_ms']:.4f}"
            print(f"| {name} | {row['host_us']:.1f} | {device} |")
    if arguments.out:
        gpu = torch.cuda.get_device_name() if arguments.device == "cuda" else None
        arguments.out.write_text(json.dumps({"gpu": gpu, "torch": torch.__version__,
                                             "results": results}, indent=1))


if __name__ == "__main__":
    main()
