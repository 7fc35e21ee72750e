"""The channels-last copy a `keep <conv> layout=channels_last` line gives its convolution's input.

One Triton kernel moves tiles of pixels by channels (read along the pixels, written along the channels), where
PyTorch's own `contiguous(memory_format=torch.channels_last)` runs a generic strided copy.
"""

from __future__ import annotations

INDENT = "    "
# pixels and channels per tile: 64 x 64 float32 is 16 KB through shared memory
TILE = 64


def conversion_source(wrapper: str, kernel: str) -> str:
    """Source of `wrapper(x)`: a 4-d tensor of any strides in channels-last memory (itself when it already is)."""
    return f'''@triton.jit
def {kernel}(
    source_ptr,
    target_ptr,
    channels,
    pixels,
    width,
    stride_n,
    stride_c,
    stride_h,
    stride_w,
    BLOCK_P: tl.constexpr,
    BLOCK_C: tl.constexpr,
):
    """Copies one tile of BLOCK_P pixels by BLOCK_C channels of one sample into channels-last memory.

    The load runs along the pixels (contiguous in NCHW), the store along the channels (contiguous in NHWC).
    """
    sample = tl.program_id(2).to(tl.int64)
    pixel = tl.program_id(0).to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)
    channel = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    mask = (pixel[:, None] < pixels) & (channel[None, :] < channels)
    row = pixel // width
    column = pixel % width
    source = sample * stride_n + channel[None, :] * stride_c + row[:, None] * stride_h + column[:, None] * stride_w
    values = tl.load(source_ptr + source, mask=mask)
    target = sample * pixels * channels + pixel[:, None] * channels + channel[None, :]
    tl.store(target_ptr + target, values, mask=mask)


def {wrapper}(x):
    """x in channels-last memory: itself when it already is, else one launch of {kernel}."""
    if x.is_contiguous(memory_format=torch.channels_last):
        return x
    batch, channels, height, width = x.shape
    relaid = torch.empty_like(x, memory_format=torch.channels_last)
    grid = (triton.cdiv(height * width, {TILE}), triton.cdiv(channels, {TILE}), batch)
    {kernel}[grid](
        x, relaid, channels, height * width, width, *x.stride(), BLOCK_P={TILE}, BLOCK_C={TILE}, num_warps=4
    )
    return relaid
'''
