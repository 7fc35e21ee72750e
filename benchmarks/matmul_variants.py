"""How far the matmul template's loop is from cuBLAS on Hopper, and which of its choices cost the most: int64 index
arithmetic, K masks on every slice, the tile and pipeline depth, and pointer loads against TMA tensor descriptors.

Times `x @ w.t()` (a linear layer: w is [N, K] row-major) in bfloat16 at the models suite's shapes with
triton.testing.do_bench (L2 cleared before each call, medians), against torch.matmul on the same tensors, and the host
time of each launch (descriptors are built on every call).
Usage (GPU): `python benchmarks/matmul_variants.py [--out FILE.json]`; prints one table per shape.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch
import triton
import triton.language as tl

# (M, N, K) of the suite's bfloat16 linear layers: swiglu_mlp's up/gate and down projections, highway_layer,
# transformer_encoder's feed-forward and attention projections
SHAPES = [(4096, 5632, 2048), (4096, 2048, 5632), (8192, 2048, 2048), (16384, 4096, 1024), (16384, 1024, 4096),
          (16384, 3072, 1024)]
# (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages); the first is the template's default for K >= 256
TILES = [(128, 256, 64, 8, 3), (128, 256, 64, 8, 4), (128, 128, 64, 4, 4), (128, 128, 64, 8, 4), (256, 128, 64, 8, 3),
         (128, 128, 128, 8, 3)]


@triton.jit
def grouped_tile(M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """This program's (row tile, column tile), GROUP_M row tiles side by side as the template orders them."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    pid = tl.program_id(0)
    tiles_in_group = GROUP_M * tiles_n
    first_tile_m = (pid // tiles_in_group) * GROUP_M
    group_rows = tl.minimum(tiles_m - first_tile_m, GROUP_M)
    tile_m = first_tile_m + (pid % tiles_in_group) % group_rows
    tile_n = (pid % tiles_in_group) // group_rows
    return tile_m, tile_n


@triton.jit
def pointer_matmul_kernel(x_ptr, w_ptr, out_ptr, M, N, K, x_stride0, w_stride0,
                          BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
                          WIDE_INDICES: tl.constexpr, EVEN_K: tl.constexpr):
    """The template's loop: grouped tile order, pointer loads of x [BLOCK_M, BLOCK_K] and w^T [BLOCK_K, BLOCK_N]."""
    tile_m, tile_n = grouped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    if WIDE_INDICES:
        rows = tile_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tile_n.to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
        ks = tl.arange(0, BLOCK_K).to(tl.int64)
    else:
        rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
        ks = tl.arange(0, BLOCK_K)
    x_ptrs = x_ptr + rows[:, None] * x_stride0 + ks[None, :]
    w_ptrs = w_ptr + cols[None, :] * w_stride0 + ks[:, None]
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_start in range(0, K, BLOCK_K):
        if EVEN_K:
            x_tile = tl.load(x_ptrs, mask=(rows < M)[:, None], other=0.0)
            w_tile = tl.load(w_ptrs, mask=(cols < N)[None, :], other=0.0)
        else:
            k = k_start + ks
            x_tile = tl.load(x_ptrs, mask=(rows < M)[:, None] & (k < K)[None, :], other=0.0)
            w_tile = tl.load(w_ptrs, mask=(k < K)[:, None] & (cols < N)[None, :], other=0.0)
        acc = tl.dot(x_tile, w_tile, acc)
        x_ptrs += BLOCK_K
        w_ptrs += BLOCK_K
    mask = (rows < M)[:, None] & (cols < N)[None, :]
    tl.store(out_ptr + rows[:, None] * N + cols[None, :], acc.to(tl.bfloat16), mask=mask)


@triton.jit
def descriptor_matmul_kernel(x_desc, w_desc, out_desc, M, N, K,
                             BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
    """The same tile order with TMA loads and stores through host-made tensor descriptors (bounds handled by TMA)."""
    tile_m, tile_n = grouped_tile(M, N, BLOCK_M, BLOCK_N, GROUP_M)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for k_start in range(0, K, BLOCK_K):
        x_tile = x_desc.load([tile_m * BLOCK_M, k_start])
        w_tile = w_desc.load([tile_n * BLOCK_N, k_start])
        acc = tl.dot(x_tile, w_tile.T, acc)
    out_desc.store([tile_m * BLOCK_M, tile_n * BLOCK_N], acc.to(tl.bfloat16))


def pointer_call(x, w, out, tile, wide, even_k):
    block_m, block_n, block_k, warps, stages = tile
    (M, K), N = x.shape, w.shape[0]
    grid = (triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)
    return lambda: pointer_matmul_kernel[grid](
        x, w, out, M, N, K, x.stride(0), w.stride(0), BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=8,
        WIDE_INDICES=wide, EVEN_K=even_k, num_warps=warps, num_stages=stages)


def descriptor_call(x, w, out, tile):
    from triton.tools.tensor_descriptor import TensorDescriptor

    block_m, block_n, block_k, warps, stages = tile
    (M, K), N = x.shape, w.shape[0]
    grid = (triton.cdiv(M, block_m) * triton.cdiv(N, block_n),)

    def call():  # the descriptors are built on every call, as a generated wrapper builds them
        x_desc = TensorDescriptor.from_tensor(x, [block_m, block_k])
        w_desc = TensorDescriptor.from_tensor(w, [block_n, block_k])
        out_desc = TensorDescriptor.from_tensor(out, [block_m, block_n])
        descriptor_matmul_kernel[grid](
            x_desc, w_desc, out_desc, M, N, K, BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=8,
            num_warps=warps, num_stages=stages)

    return call


def time_variant(call, out, expected) -> dict:
    try:
        call()
        torch.cuda.synchronize()
    except Exception as failure:  # a tile that does not fit shared memory is reported, not fatal
        return {"error": f"{type(failure).__name__}: {str(failure)[:120]}"}
    error = (out.float() - expected).abs().max().item() / expected.abs().max().item()
    return {
        "ms": triton.testing.do_bench(call, warmup=25, rep=200, return_mode="median"),
        "host_us": host_microseconds(call),
        "relative_error": error,
    }


def host_microseconds(call, calls: int = 50) -> float:
    """Host time per launch, enqueueing `calls` launches on an idle GPU (fewer than its queue holds)."""
    torch.cuda.synchronize()
    started = time.perf_counter()
    for _ in range(calls):
        call()
    elapsed = time.perf_counter() - started
    torch.cuda.synchronize()
    return elapsed / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the measurements as JSON")
    parser.add_argument("--shapes", type=int, default=len(SHAPES), help="time the first N shapes only")
    args = parser.parse_args()
    torch.manual_seed(0)
    results = []
    for M, N, K in SHAPES[: args.shapes]:
        x = torch.randn(M, K, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(N, K, device="cuda", dtype=torch.bfloat16) / K**0.5
        out = torch.empty(M, N, device="cuda", dtype=torch.bfloat16)
        expected = x.float() @ w.float().t()
        library_ms = triton.testing.do_bench(lambda: torch.matmul(x, w.t()), warmup=25, rep=200, return_mode="median")
        rows = {}
        for tile in TILES:
            name = "x".join(map(str, tile[:3])) + f" w{tile[3]} s{tile[4]}"
            rows[f"pointers int64, K masks, {name}"] = time_variant(pointer_call(x, w, out, tile, True, False), out, expected)
            rows[f"pointers int32, K masks, {name}"] = time_variant(pointer_call(x, w, out, tile, False, False), out, expected)
            if K % tile[2] == 0:
                rows[f"pointers int32, no K masks, {name}"] = time_variant(pointer_call(x, w, out, tile, False, True), out, expected)
            rows[f"TMA descriptors, {name}"] = time_variant(descriptor_call(x, w, out, tile), out, expected)
        flops = 2 * M * N * K
        print(f"\n### M={M} N={N} K={K}: torch.matmul {library_ms:.4f} ms ({flops / library_ms / 1e9:.0f} TFLOP/s)\n")
        print("| variant | ms | of library | host us per launch | max error (relative) |\n|---|---|---|---|---|")
        for name, row in rows.items():
            if "error" in row:
                print(f"| {name} | {row['error']} | - | - | - |")
            else:
                print(
                    f"| {name} | {row['ms']:.4f} | {library_ms / row['ms']:.0%} | {row['host_us']:.1f} "
                    f"| {row['relative_error']:.1e} |"
                )
        results.append({"shape": [M, N, K], "library_ms": library_ms, "variants": rows})
    best = [max((library_ms_ratio(r, name) for name in r["variants"]), default=0) for r in results]
    print(f"\nbest variant per shape, of library: {[f'{b:.0%}' for b in best]} (median {statistics.median(best):.0%})")
    if args.out:
        with open(args.out, "w") as handle:
            json.dump({"torch": torch.__version__, "triton": triton.__version__,
                       "device": torch.cuda.get_device_name(), "results": results}, handle, indent=1)


def library_ms_ratio(result: dict, name: str) -> float:
    row = result["variants"][name]
    return result["library_ms"] / row["ms"] if "ms" in row else 0.0


if __name__ == "__main__":
    main()
