"""What write-back costs on a 3,000-line file: `ast` parse, libcst parse, and the whole libcst edit.

The file is lsp_latency.py's (50 module targets); the kernels are a real compiled program (an RMSNorm-sized
block). Prints medians over repeats, and the same edit into a file that already holds 10 written blocks.
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


if __name__ == "__main__":
    main()
