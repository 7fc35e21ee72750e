"""Host cost of one Triton launch through JITFunction.run (few and many arguments) against PyTorch calls, on a GPU;
and where a launch's time goes: the argument binder (specialization), the cache key, the stream query, and the
compiled kernel's own launcher called directly with everything else cached (what a launch could cost at least).

Usage (GPU): `python benchmarks/launch_cost.py`; prints microseconds of host time per call (enqueue only, the GPU idle).
"""

from __future__ import annotations

import time

import torch
import triton
import triton.language as tl

WARM_UP_CALLS = 20
TIMED_CALLS = 200  # fewer launches than CUDA's queue holds, so enqueueing them measures the host alone


@triton.jit
def copy_few_arguments(a_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=offsets < n), mask=offsets < n)


@triton.jit
def copy_many_arguments(a_ptr, b_ptr, c_ptr, d_ptr, e_ptr, out_ptr, n, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10,
                        s11, s12, s13, s14, s15, F1: tl.constexpr, F2: tl.constexpr, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offsets, tl.load(a_ptr + offsets, mask=offsets < n), mask=offsets < n)


def host_microseconds(call) -> float:
    """Host time per call of `call`, enqueued back to back after a warm-up."""
    for _ in range(WARM_UP_CALLS):
        call()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(TIMED_CALLS):
        call()
    elapsed = time.perf_counter() - start
    torch.cuda.synchronize()
    return elapsed / TIMED_CALLS * 1e6


def main() -> None:
    x = torch.randn(1 << 20, device="cuda")
    out = torch.empty_like(x)
    grid = (triton.cdiv(x.numel(), 1024),)
    indices = torch.randint(0, 9, (64, 512), device="cuda")
    shape = torch.Size([64, 512, 768])
    calls = {
        "Triton, 3 arguments": lambda: copy_few_arguments[grid](x, out, x.numel(), BLOCK=1024),
        "Triton, 25 arguments": lambda: copy_many_arguments[grid](
            x, x, x, x, x, out, x.numel(), *range(1, 17), F1=True, F2=False, BLOCK=1024
        ),
        "torch.add": lambda: torch.add(x, x, out=out),
        "torch.empty": lambda: torch.empty(shape, device="cuda"),
        "expand(...).stride()": lambda: indices[..., None].expand(shape).stride(),
        # how the hybrid forward used to spell views and shape reads, and how it spells them now (forward_source.py)
        "torch.ops.aten.view": lambda: torch.ops.aten.view.default(x, [-1, 1024]),
        "x.view": lambda: x.view([-1, 1024]),
        "torch.ops.aten.sym_size": lambda: torch.ops.aten.sym_size.int(indices, 1),
        "x.size": lambda: indices.size(1),
    }
    calls.update(launch_parts(copy_many_arguments, grid, (x, x, x, x, x, out, x.numel(), *range(1, 17)),
                              {"F1": True, "F2": False, "BLOCK": 1024}))
    for name, call in calls.items():
        print(f"{name:40s} {host_microseconds(call):6.1f} us")


def launch_parts(function, grid, arguments, constants) -> dict:
    """Callables for the steps of `function[grid](*arguments, **constants)` (JITFunction.run, Triton 3.6 and 3.7):
    the binder alone, the binder and the cache key, the current stream, and the compiled kernel's launcher called with
    the bound arguments, metadata and stream of a first call (no hooks). Empty where this Triton's internals differ."""
    from triton.runtime import driver
    from triton.runtime.jit import compute_cache_key

    try:
        kernel = function[grid](*arguments, **constants)
        device = driver.active.get_current_device()
        stream = driver.active.get_current_stream(device)
        kernel_cache, kernel_key_cache, _target, _backend, binder = function.device_caches[device]
        options = {"debug": False, "instrumentation_mode": ""}
        bound, specialization, bound_options = binder(*arguments, **constants, **options)
        values = list(bound.values())
        grid_0 = grid[0]
        return {
            "  of which: binder": lambda: binder(*arguments, **constants, **options),
            "  of which: binder + cache key": lambda: compute_cache_key(
                kernel_key_cache, binder(*arguments, **constants, **options)[1], bound_options),
            "  of which: current device and stream": lambda: driver.active.get_current_stream(
                driver.active.get_current_device()),
            "  compiled launcher alone": lambda: kernel.run(
                grid_0, 1, 1, stream, kernel.function, kernel.packed_metadata, None, None, None, *values),
        }
    except Exception as error:  # noqa: BLE001 - internals of another Triton: say so and time the rest
        print(f"(launch parts not timed: {type(error).__name__}: {error})")
        return {}


if __name__ == "__main__":
    main()
