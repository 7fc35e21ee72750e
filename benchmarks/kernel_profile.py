"""Per-kernel device times of written-back modules against eager PyTorch, from a `drtriton bench` results.json
(a profile, not a guess, of which kernel loses): `python benchmarks/kernel_profile.py --results R --problems D --out O`.

For each problem whose report carries a written-back module (kernel.source), runs eager, torch.compile (default mode)
and ours under torch.profiler and writes the kernels' names, launches and device microseconds per call to
OUT/profile.md and OUT/profile.json.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import tempfile
import traceback
from pathlib import Path

import torch
from torch.profiler import ProfilerActivity, profile

WARMUP_CALLS = 3
PROFILED_CALLS = 5


def import_file(path: Path, name: str):
    """The module at path (written to a file: Triton reads a kernel's source from its file)."""
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def build(module, device: str):
    """A model of module's Model with seeded weights on device, and its example inputs there."""
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs()).to(device).eval()
    torch.manual_seed(1)
    inputs = [value.to(device) if isinstance(value, torch.Tensor) else value for value in module.get_inputs()]
    return model, inputs


def kernel_table(model, inputs) -> dict:
    """Device microseconds per call by kernel name, over PROFILED_CALLS calls after WARMUP_CALLS."""
    with torch.no_grad():
        for _ in range(WARMUP_CALLS):
            model(*inputs)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as profiler:
            for _ in range(PROFILED_CALLS):
                model(*inputs)
            torch.cuda.synchronize()
    kernels = {}
    for event in profiler.events():
        if event.device_type != torch.autograd.DeviceType.CUDA:
            continue
        entry = kernels.setdefault(event.name, {"launches": 0, "us": 0.0})
        entry["launches"] += 1
        entry["us"] += event.device_time_total if hasattr(event, "device_time_total") else event.cuda_time_total
    rows = [
        {"kernel": name, "launches_per_call": entry["launches"] / PROFILED_CALLS,
         "us_per_call": entry["us"] / PROFILED_CALLS}
        for name, entry in kernels.items()
    ]
    rows.sort(key=lambda row: -row["us_per_call"])
    return {"total_us": sum(row["us_per_call"] for row in rows), "kernels": rows}


def profile_problem(report: dict, problems: Path, scratch: Path) -> dict:
    """Eager's and the written-back module's kernel tables for one report."""
    name = Path(report["file"]).stem
    original = import_file(problems / f"{name}.py", f"eager_{name}")
    written_path = scratch / f"written_{name}.py"
    written_path.write_text(report["kernel"]["source"])
    written = import_file(written_path, f"written_{name}")
    eager_model, inputs = build(original, "cuda")
    our_model, our_inputs = build(written, "cuda")
    our_model.load_state_dict(eager_model.state_dict())
    with torch.no_grad():
        expected = eager_model(*inputs)
        got = our_model(*our_inputs)
    pairs = zip(got, expected) if isinstance(got, (tuple, list)) else [(got, expected)]
    error = max((ours.float() - theirs.float()).abs().max().item() for ours, theirs in pairs)
    return {
        "problem": name,
        "schedule": report["kernel"].get("schedule"),
        "max_abs_error": error,
        "eager": kernel_table(eager_model, inputs),
        "compile": kernel_table(torch.compile(eager_model), inputs),
        "ours": kernel_table(our_model, our_inputs),
    }


def markdown(results: list[dict]) -> str:
    """The tables of profile.json as Markdown."""
    lines = [f"# Kernel profile, {torch.cuda.get_device_name()} (torch {torch.__version__})", ""]
    for result in results:
        lines.append(f"## {result['problem']}")
        if "error" in result:
            lines += ["", "```", result["error"], "```", ""]
            continue
        lines += ["", "```", (result["schedule"] or "").rstrip(), "```", "",
                  f"max abs error vs eager: {result['max_abs_error']:.3g}", ""]
        for side in ("eager", "compile", "ours"):
            table = result.get(side)
            if table is None:  # profiles recorded before the compile column
                continue
            lines += [f"{side}: {table['total_us']:.1f} us of device time per call", "",
                      "| kernel | launches | us |", "|---|---|---|"]
            lines += [f"| `{row['kernel'][:110]}` | {row['launches_per_call']:g} | {row['us_per_call']:.1f} |"
                      for row in table["kernels"]]
            lines.append("")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--results", type=Path, required=True, help="a drtriton bench results.json")
    parser.add_argument("--problems", type=Path, required=True, help="the folder of the problems' original files")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--match", nargs="*", default=[], help="only problems whose file holds one of these")
    arguments = parser.parse_args()
    bench = json.loads(arguments.results.read_text())
    scratch = Path(tempfile.mkdtemp())
    results = []
    for problem in bench["problems"]:
        report = problem.get("report") or {}
        if not (report.get("kernel") or {}).get("source"):
            continue
        if arguments.match and not any(text in report["file"] for text in arguments.match):
            continue
        try:
            results.append(profile_problem(report, arguments.problems, scratch))
        except Exception:
            results.append({"problem": Path(report["file"]).stem, "error": traceback.format_exc()})
        print(markdown(results[-1:]), flush=True)
    arguments.out.mkdir(parents=True, exist_ok=True)
    (arguments.out / "profile.json").write_text(json.dumps(results, indent=1))
    (arguments.out / "profile.md").write_text(markdown(results))


if __name__ == "__main__":
    main()
