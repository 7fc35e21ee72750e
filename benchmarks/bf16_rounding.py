"""What rounding bfloat16 intermediates costs in a written-back module's kernels: by integer ops, by casts, or not at all.

Takes a `drtriton optimize --json` report (its kernel.source is the written-back module) whose kernels round through
the generated round_to_bfloat16 helper with integer ops (sources from before 7d3fd34), rewrites that helper's body as a
cast or as no rounding, and times the hybrid forward of each (triton.testing.do_bench), with each result's largest
difference from eager and from a float64 run of the reference.

Usage (GPU): `PYTHONPATH=$PWD python benchmarks/bf16_rounding.py REPORT.json`
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import tempfile
from pathlib import Path

import torch
import triton

# the integer-op body of the helper as it was generated before 7d3fd34, from its first statement to its return
BODY_START = "    bits = x.to(tl.uint32, bitcast=True)"
BODY_END = ".to(tl.float32, bitcast=True)"
VARIANTS = {
    "integer ops": None,
    "cast": "    return x.to(tl.bfloat16).to(tl.float32)",
    "none": "    return x",
}


def variant_source(source: str, body: str | None) -> str:
    if body is None:
        return source
    start = source.index(BODY_START)
    end = source.index(BODY_END, start) + len(BODY_END)
    return source[:start] + body + source[end:]


def load(source: str, name: str):
    path = Path(tempfile.mkdtemp()) / f"{name}.py"  # Triton reads kernels' source from their file
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def largest_difference(result: torch.Tensor, reference: torch.Tensor) -> float:
    return float((result.double() - reference.double()).abs().max())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", type=Path)
    source = json.loads(parser.parse_args().report.read_text())["kernel"]["source"]
    for label, body in VARIANTS.items():
        module = load(variant_source(source, body), "rounding_" + label.replace(" ", "_"))
        torch.manual_seed(0)
        model = module.Model(*module.get_init_inputs()).cuda().eval()
        torch.manual_seed(0)
        wide_model = module.Model(*module.get_init_inputs()).cuda().eval().double()
        torch.manual_seed(1)
        inputs = [value.cuda() if isinstance(value, torch.Tensor) else value for value in module.get_inputs()]
        hybrid = next(getattr(module, name) for name in dir(module) if name.endswith("_triton_forward"))
        with torch.no_grad():
            result = hybrid(model, *inputs)
            eager = module.Model.forward.reference(model, *inputs)
            wide = [value.double() if value.is_floating_point() else value for value in inputs]
            float64 = module.Model.forward.reference(wide_model, *wide)
            microseconds = triton.testing.do_bench(lambda: hybrid(model, *inputs), rep=200) * 1000
        print(
            f"{label:12s} hybrid forward {microseconds:7.1f} us  |result - eager| {largest_difference(result, eager):.3e}"
            f"  |result - float64| {largest_difference(result, float64):.3e}"
            f"  |eager - float64| {largest_difference(eager, float64):.3e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
