"""Where a convolution block's time goes on the GPU, per memory layout: the measurements issue #14's conv plan rests on.

For conv -> batch norm (inference) -> ReLU blocks at the models suite's sizes, times eager, torch.compile and the
hybrids drtriton can build (cuDNN's convolution kept, the epilogue in one Triton kernel) in NCHW and channels-last.

Usage (GPU): `PYTHONPATH=$PWD python benchmarks/conv_layouts.py --out results.json` (prints Markdown tables).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import platform
import statistics
import subprocess
import tempfile
from dataclasses import dataclass
from datetime import datetime, timezone

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

from drtriton_lsp.compiler.channels_last import conversion_source

CHANNELS_LAST = torch.channels_last


def product_conversion():
    """The product's channels-last conversion (what `keep <conv> layout=channels_last` calls), loaded from a file as
    generated code is (Triton reads a kernel's source from its file)."""
    path = tempfile.NamedTemporaryFile("w", suffix=".py", delete=False)
    with path:
        path.write("import torch\nimport triton\nimport triton.language as tl\n\n\n")
        path.write(conversion_source("to_channels_last", "to_channels_last_kernel"))
    spec = importlib.util.spec_from_file_location("product_conversion", path.name)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.to_channels_last


@dataclass(frozen=True)
class ConvCase:
    """One conv -> BN -> ReLU block: input (batch, channels, size, size), `out_channels`, kernel, stride, groups."""

    name: str
    batch: int
    channels: int
    size: int
    out_channels: int
    kernel: int
    stride: int = 1
    groups: int = 1
    dtype: torch.dtype = torch.float32


CASES = (
    ConvCase("3x3 128->256 @56 (conv_bn_relu)", 32, 128, 56, 256, 3),
    ConvCase("3x3 64->128 @128, batch 128 (large conv)", 128, 64, 128, 128, 3),
    ConvCase("1x1 256->64 @56 (bottleneck reduce)", 32, 256, 56, 64, 1),
    ConvCase("3x3 s2 64->128 @112, bf16 (downsample)", 32, 64, 112, 128, 3, stride=2, dtype=torch.bfloat16),
    ConvCase("depthwise 3x3 256 @56", 32, 256, 56, 256, 3, groups=256),
)


@triton.jit
def affine_relu_flat(x_ptr, scale_ptr, shift_ptr, out_ptr, numel, channels, channel_stride, BLOCK: tl.constexpr):
    """out = relu(x * scale[c] + shift[c]) over memory order: c = (offset // channel_stride) % channels."""
    offsets = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < numel
    channel = (offsets // channel_stride) % channels
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    scale = tl.load(scale_ptr + channel, mask=mask)
    shift = tl.load(shift_ptr + channel, mask=mask)
    y = tl.maximum(x * scale + shift, 0.0)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def affine_relu_to_nchw(x_ptr, scale_ptr, shift_ptr, out_ptr, channels, spatial,
                        BLOCK_S: tl.constexpr, BLOCK_C: tl.constexpr):
    """Reads a channels-last tile [BLOCK_S positions, BLOCK_C channels], writes it NCHW: both sides coalesced."""
    sample = tl.program_id(2).to(tl.int64)
    positions = tl.program_id(0) * BLOCK_S + tl.arange(0, BLOCK_S)
    chans = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (positions[:, None] < spatial) & (chans[None, :] < channels)
    base = sample * spatial * channels
    x = tl.load(x_ptr + base + positions[:, None] * channels + chans[None, :], mask=mask).to(tl.float32)
    scale = tl.load(scale_ptr + chans, mask=chans < channels)
    shift = tl.load(shift_ptr + chans, mask=chans < channels)
    y = tl.maximum(x * scale[None, :] + shift[None, :], 0.0)
    tl.store(out_ptr + base + chans[None, :] * spatial + positions[:, None], y.to(out_ptr.dtype.element_ty), mask=mask)


def epilogue_flat(conv_out: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """The epilogue in the conv output's own memory order (NCHW or channels-last), output in the same layout."""
    out = torch.empty_like(conv_out)
    n, c, h, w = conv_out.shape
    channel_stride = 1 if conv_out.is_contiguous(memory_format=CHANNELS_LAST) and not conv_out.is_contiguous() else h * w
    affine_relu_flat[(triton.cdiv(conv_out.numel(), 1024),)](
        conv_out, scale, shift, out, conv_out.numel(), c, channel_stride, BLOCK=1024, num_warps=4)
    return out


def epilogue_to_nchw(conv_out: torch.Tensor, scale: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """The epilogue reading a channels-last conv output and writing PyTorch's default (NCHW) layout."""
    n, c, h, w = conv_out.shape
    out = torch.empty((n, c, h, w), dtype=conv_out.dtype, device=conv_out.device)
    block_s, block_c = 64, 64
    grid = (triton.cdiv(h * w, block_s), triton.cdiv(c, block_c), n)
    affine_relu_to_nchw[grid](conv_out, scale, shift, out, c, h * w, BLOCK_S=block_s, BLOCK_C=block_c, num_warps=4)
    return out


def variants(case: ConvCase, device: str) -> tuple[dict, torch.Tensor]:
    """name -> (callable, input) for the case, and eager's output (the errors are measured against it)."""
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(case.channels, case.out_channels, case.kernel, stride=case.stride,
                           padding=case.kernel // 2, groups=case.groups, bias=False)
    norm = torch.nn.BatchNorm2d(case.out_channels)
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5), norm.bias.uniform_(-0.5, 0.5)
        norm.running_mean.uniform_(-0.5, 0.5), norm.running_var.uniform_(0.5, 2.0)
    model = torch.nn.Sequential(conv, norm, torch.nn.ReLU(inplace=True)).eval().to(device, case.dtype)
    x = torch.randn(case.batch, case.channels, case.size, case.size, device=device, dtype=case.dtype)
    weight = conv.weight
    scale = (norm.weight.float() * torch.rsqrt(norm.running_var.float() + norm.eps)).contiguous()
    shift = (norm.bias.float() - norm.running_mean.float() * scale).contiguous()
    conv_args = dict(stride=case.stride, padding=case.kernel // 2, groups=case.groups)
    x_channels_last = x.contiguous(memory_format=CHANNELS_LAST)

    def hybrid_nchw(inp):  # today's hybrid: cuDNN in NCHW, then one fused Triton epilogue
        return epilogue_flat(F.conv2d(inp, weight, **conv_args), scale, shift)

    def hybrid_cl_back_to_nchw(inp):  # input converted per call, channels-last cuDNN, tiled epilogue writes NCHW
        return epilogue_to_nchw(F.conv2d(inp.contiguous(memory_format=CHANNELS_LAST), weight, **conv_args), scale, shift)

    def hybrid_cl_stays_cl(inp):  # input converted per call, output left channels-last
        return epilogue_flat(F.conv2d(inp.contiguous(memory_format=CHANNELS_LAST), weight, **conv_args), scale, shift)

    to_channels_last = product_conversion()

    def hybrid_triton_conversion(inp):  # the product's conversion kernel, then channels-last cuDNN and epilogue
        return epilogue_flat(F.conv2d(to_channels_last(inp), weight, **conv_args), scale, shift)

    def hybrid_cl_throughout(inp):  # the producer already wrote channels-last (a chain of such blocks)
        return epilogue_flat(F.conv2d(inp, weight, **conv_args), scale, shift)

    def eager_cl_throughout(inp):
        return model(inp)

    compiled = torch.compile(model)
    table = {
        "eager (NCHW)": (model, x),
        "torch.compile (NCHW in)": (compiled, x),
        "hybrid: cuDNN NCHW + epilogue": (hybrid_nchw, x),
        "hybrid: to CL, cuDNN CL, epilogue writes NCHW": (hybrid_cl_back_to_nchw, x),
        "hybrid: to CL, cuDNN CL, epilogue writes CL": (hybrid_cl_stays_cl, x),
        "hybrid: Triton to CL, cuDNN CL, epilogue CL": (hybrid_triton_conversion, x),
        "hybrid: CL input, cuDNN CL, epilogue CL": (hybrid_cl_throughout, x_channels_last),
        "conversion alone: PyTorch contiguous(channels_last)": (lambda inp: inp.contiguous(memory_format=CHANNELS_LAST), x),
        "conversion alone: the product's Triton kernel": (to_channels_last, x),
        "eager, CL input": (eager_cl_throughout, x_channels_last),
    }
    with torch.no_grad():
        expected = model(x).float()
    return table, expected


def measure(case: ConvCase, device: str) -> dict:
    """Median ms per variant (do_bench: L2 flushed, back to back) and each one's max error against eager."""
    table, expected = variants(case, device)
    rows = {}
    for name, (function, inp) in table.items():
        with torch.no_grad():
            try:
                out = function(inp)
                torch.cuda.synchronize()
                reference = inp if name.startswith("conversion alone") else expected
                error = (out.float() - reference.float()).abs().max().item()
                times = [triton.testing.do_bench(lambda: function(inp), warmup=25, rep=100, return_mode="median")
                         for _ in range(3)]
                rows[name] = {"ms": statistics.median(times), "max_error_vs_eager": error,
                              "output_channels_last": bool(out.is_contiguous(memory_format=CHANNELS_LAST)
                                                           and not out.is_contiguous())}
            except Exception as failure:  # a variant that cannot run at this size is reported, not fatal
                rows[name] = {"error": f"{type(failure).__name__}: {failure}"[:300]}
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", help="write the measurements as JSON here")
    arguments = parser.parse_args()
    device = "cuda"
    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    header = {"command": "python benchmarks/conv_layouts.py", "commit": commit,
              "gpu": torch.cuda.get_device_name(), "python": platform.python_version(), "torch": torch.__version__,
              "triton": triton.__version__, "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
              "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32}
    results = {"header": header, "cases": {}}
    for case in CASES:
        rows = measure(case, device)
        results["cases"][case.name] = rows
        eager = rows["eager (NCHW)"].get("ms")
        compiled = rows["torch.compile (NCHW in)"].get("ms")
        print(f"\n### {case.name}, {str(case.dtype).removeprefix('torch.')}\n")
        print("| variant | ms | vs eager | vs compile | max error vs eager | output CL |\n|---|---|---|---|---|---|")
        for name, row in rows.items():
            if "error" in row:
                print(f"| {name} | {row['error']} | | | | |")
                continue
            print(f"| {name} | {row['ms']:.4f} | {eager / row['ms']:.2f}x | {compiled / row['ms']:.2f}x | "
                  f"{row['max_error_vs_eager']:.2e} | {row['output_channels_last']} |")
    if arguments.out:
        with open(arguments.out, "w") as handle:
            json.dump(results, handle, indent=1)


if __name__ == "__main__":
    main()
