"""Host cost of one Triton launch through JITFunction.run (few and many arguments) against PyTorch calls, on a GPU.

Usage (GPU): `python benchmarks/launch_cost.py`; prints microseconds of host time per call (enqueue only, the GPU idle).
"""
import time, torch, triton, triton.language as tl

@triton.jit
def few(a_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=offs < n), mask=offs < n)

@triton.jit
def many(a_ptr, b_ptr, c_ptr, d_ptr, e_ptr, out_ptr, n, s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13,
         s14, s15, F1: tl.constexpr, F2: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(a_ptr + offs, mask=offs < n), mask=offs < n)

x = torch.randn(1 << 20, device="cuda"); out = torch.empty_like(x)
def host_us(fn, calls=200):
    for _ in range(20): fn()
    torch.cuda.synchronize(); start = time.perf_counter()
    for _ in range(calls): fn()
    elapsed = time.perf_counter() - start; torch.cuda.synchronize()
    return elapsed / calls * 1e6
grid = (triton.cdiv(x.numel(), 1024),)
print("few args   ", host_us(lambda: few[grid](x, out, x.numel(), BLOCK=1024)))
print("many args  ", host_us(lambda: many[grid](x, x, x, x, x, out, x.numel(), *range(1, 17), F1=True, F2=False, BLOCK=1024)))
print("torch add  ", host_us(lambda: torch.add(x, x, out=out)))
print("torch.empty", host_us(lambda: torch.empty((64, 512, 768), device="cuda")))
ids = torch.randint(0, 9, (64, 512), device="cuda"); shape = torch.Size([64, 512, 768])
print("expand.stride", host_us(lambda: ids[..., None].expand(shape).stride()))
