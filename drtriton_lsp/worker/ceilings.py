"""The worker's `ceilings` method: what this GPU reaches at best, timed like every benchmark.

Copy bandwidth (a large device-to-device copy) bounds memory-bound kernels; torch.matmul on a
problem's own shapes and dtypes bounds matmul-class ones (the library's rate, TF32 only if asked).
"""

from __future__ import annotations

from typing import Any, Callable

import torch

from drtriton_lsp.worker.benchmark import L2_FLUSH_BYTES, time_calls

COPY_BYTES = 1024**3  # 1 GiB each way: far beyond any cache, long enough to time precisely


def run_ceilings(params: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """params: copy (bool), matmuls ([{batch, m, n, k, dtype}]), tf32 (bool)."""
    if not torch.cuda.is_available():
        return {"copy": None, "matmul": None, "reason": "no CUDA GPU in the worker: no ceiling is measured"}
    device = torch.device("cuda")
    flush_buffer = torch.empty(L2_FLUSH_BYTES, dtype=torch.uint8, device=device)
    result: dict[str, Any] = {"copy": None, "matmul": None, "reason": ""}
    if params.get("copy"):
        progress("timing a 1 GiB device-to-device copy")
        source = torch.empty(COPY_BYTES, dtype=torch.uint8, device=device)
        destination = torch.empty_like(source)
        timed = time_calls(lambda: destination.copy_(source), flush_buffer)
        moved = 2 * COPY_BYTES  # read once, written once: the same count the problems use
        result["copy"] = {"bytes": moved, "ms": timed["median_ms"], "gb_per_s": moved / timed["median_ms"] / 1e6}
        del source, destination
    if params.get("matmuls"):
        progress("timing torch.matmul on the problem's shapes")
        result["matmul"] = time_library_matmuls(params["matmuls"], bool(params.get("tf32")), flush_buffer)
    return result


def time_library_matmuls(shapes: list[dict[str, Any]], tf32: bool, flush_buffer: torch.Tensor) -> dict[str, Any]:
    """Median time of torch.matmul over every shape in turn, and the FLOP rate that gives."""
    operands = []
    for shape in shapes:
        dtype = getattr(torch, shape["dtype"])
        leading = (shape["batch"],) if shape["batch"] > 1 else ()
        left = torch.randn(*leading, shape["m"], shape["k"], device="cuda").to(dtype)
        right = torch.randn(*leading, shape["k"], shape["n"], device="cuda").to(dtype)
        operands.append((left, right))
    flops = sum(2 * s["batch"] * s["m"] * s["n"] * s["k"] for s in shapes)
    previous = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    try:
        timed = time_calls(lambda: [torch.matmul(left, right) for left, right in operands], flush_buffer)
    finally:
        torch.backends.cuda.matmul.allow_tf32 = previous
    return {"ms": timed["median_ms"], "flops": flops, "tflops": flops / timed["median_ms"] / 1e9, "tf32": tf32}
