"""What write-back costs: the edit on a 3,000-line file (`ast` parse, libcst parse, the whole libcst edit), and
the written dispatch's check at every call.

The file is lsp_latency.py's (50 module targets) with a 120-line kernel block per target; medians over repeats,
and the same edit into a file that already holds 10 written blocks. The call cost is tests/source/data's
MLPBlock with the guards capture records for it, and a stand-in Triton forward that returns at once.
Run: `python benchmarks/write_back_cost.py`.
"""

from __future__ import annotations

import ast
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lsp_latency import generated_file  # noqa: E402 - the benchmark folder is not a package

from drtriton_lsp.compiler.codegen import CompiledProgram  # noqa: E402
from drtriton_lsp.source.writeback import write_back  # noqa: E402

REPEATS = 7
GUARDS = [
    {"kind": "parameter", "name": "gain", "dtype": "float32", "shape": [256]},
    {"kind": "tensor", "name": "x", "dtype": "float32", "shape": [None, 256]},
    {"kind": "sizes", "symbol": "s0", "dims": [["x", 0]], "low": 2, "high": None},
]


def program(index: int) -> CompiledProgram:
    """A 120-line kernel block, as the compiler writes for a two-kernel target."""
    body = "\n".join(f"    value_{line} = x * {line}.0  # a line of kernel code" for line in range(100))
    block = f"@triton.jit\ndef block{index}_kernel(x_ptr, n, BLOCK: tl.constexpr):\n{body}\n\n\n" \
            f"def block{index}_triton_forward(self, x):\n" + "\n".join(f"    y{line} = x" for line in range(15)) + "\n    return x\n"
    return CompiledProgram(block, f"block{index}_triton_forward", ("k",), (), (), "kernel")


def median_ms(action) -> float:
    samples = []
    for _ in range(REPEATS):
        start = time.perf_counter()
        action()
        samples.append((time.perf_counter() - start) * 1000)
    return statistics.median(samples)


def dispatch_overhead_us() -> tuple[int, float, float]:
    """(guards, best microseconds per call through the written dispatch, per call of a bare module)."""
    import os
    import tempfile

    os.environ["TRITON_INTERPRET"] = "1"  # CPU tensors count as a Triton device
    import torch

    from drtriton_lsp.source.extract import extract_task
    from drtriton_lsp.task import load_module_from_source
    from drtriton_lsp.worker.capture_job import run_capture

    source = (Path(__file__).resolve().parents[1] / "tests" / "source" / "data" / "realistic_model.py").read_text()
    guards = run_capture({"task": extract_task(source, "MLPBlock").to_json()}, lambda _message: None)["guards"]
    stand_in = CompiledProgram("def mlp_triton_forward(self, x):\n    return x\n", "mlp_triton_forward", (), (), (), "")
    written = load_module_from_source(write_back(source, "MLPBlock", stand_in, "p", guards), "written", Path(tempfile.mkdtemp()))
    block, bare, x = written.MLPBlock(256, 1024).eval(), torch.nn.Identity(), torch.randn(8, 256)

    def best_us(call) -> float:
        for _ in range(300):
            call()
        rounds = []
        for _ in range(7):
            start = time.perf_counter()
            for _ in range(2000):
                call()
            rounds.append((time.perf_counter() - start) / 2000 * 1e6)
        return min(rounds)

    with torch.no_grad():
        return len(guards), best_us(lambda: block(x)), best_us(lambda: bare(x))


def main() -> None:
    import libcst

    source = generated_file()
    crowded = source
    for index in range(10):
        crowded = write_back(crowded, f"Block{index}", program(index), "provenance", GUARDS)
    print(f"file: {source.count(chr(10))} lines; with 10 blocks written: {crowded.count(chr(10))} lines")
    print(f"ast.parse:               {median_ms(lambda: ast.parse(source)):7.1f} ms")
    print(f"libcst.parse_module:     {median_ms(lambda: libcst.parse_module(source)):7.1f} ms")
    print(f"write_back (one target): {median_ms(lambda: write_back(source, 'Block40', program(40), 'p', GUARDS)):7.1f} ms")
    print(f"write_back, 10 blocks in: {median_ms(lambda: write_back(crowded, 'Block40', program(40), 'p', GUARDS)):6.1f} ms")
    guards, dispatched, bare = dispatch_overhead_us()
    print(f"a call through the dispatch ({guards} guards): {dispatched:.1f} us; a bare module call: {bare:.1f} us")


if __name__ == "__main__":
    main()
