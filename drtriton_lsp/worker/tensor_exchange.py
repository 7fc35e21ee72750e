"""How tensors cross between the judge and the candidate's process: the judge's own GPU memory shared by handle
(CUDA IPC) on a GPU, files on the CPU.

Only the judge pickles. The candidate's process answers in JSON and writes output values into buffers the judge owns
(GPU), or into files the judge reads with PyTorch's safe loader (CPU): nothing it sends can run code in the judge.
"""

from __future__ import annotations

import base64
import io
import pickle
from multiprocessing.reduction import ForkingPickler
from typing import Any

import torch
import torch.multiprocessing  # noqa: F401 - registers the reductions that share tensors by handle


def flat_values(value: Any) -> list:
    """A forward's result as the flat list both sides compare element by element (nested lists and tuples opened)."""
    if isinstance(value, (list, tuple)):
        flat: list = []
        for item in value:
            flat.extend(flat_values(item))
        return flat
    return [value]


def share(value: Any) -> str:
    """Text the candidate's process turns back into `value`, whose CUDA tensors are this process's memory (the caller
    keeps them alive until the answer arrives)."""
    buffer = io.BytesIO()
    ForkingPickler(buffer, pickle.HIGHEST_PROTOCOL).dump(value)
    return base64.b64encode(buffer.getvalue()).decode("ascii")


def unshare(text: str) -> Any:
    """In the candidate's process: the value `share` sent (only the judge's text is ever unpickled)."""
    return pickle.loads(base64.b64decode(text))


def same_layout_on(value: Any, device: torch.device) -> Any:
    """`value` on `device` with its exact size and strides (a strided view stays strided; `.to` would pack it)."""
    if not isinstance(value, torch.Tensor):
        return value
    placed = torch.empty_strided(tuple(value.shape), tuple(value.stride()), dtype=value.dtype, device=device)
    placed.copy_(value)
    return placed


def deliver(outputs: list[Any], receptacles: list[torch.Tensor | None]) -> None:
    """In the candidate's process: copy each plain tensor output into the judge's buffer of its shape and dtype
    (a mismatch is left for the judge to see in the outputs' description)."""
    for value, receptacle in zip(outputs, receptacles):
        if (
            receptacle is not None
            and type(value) is torch.Tensor
            and value.shape == receptacle.shape
            and value.dtype == receptacle.dtype
        ):
            receptacle.copy_(value)
    if any(receptacle is not None and receptacle.is_cuda for receptacle in receptacles):
        torch.cuda.synchronize()
