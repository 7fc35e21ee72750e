"""What hardware and software a worker sees, and which device a job should use.

`describe_devices` runs in a worker (it imports torch); the parent gets its answer through the
`capabilities` or `capture` methods and decides with `resolve_device`.
"""

from __future__ import annotations

import platform
import sys
from typing import Any

from drtriton_lsp.errors import DrtritonError


def describe_devices() -> dict:
    import torch
    import triton

    cuda = torch.cuda.is_available()
    return {
        "cuda_available": cuda,
        "cuda_device_name": torch.cuda.get_device_name(0) if cuda else None,
        "cpu_name": cpu_model_name(),
        "versions": {
            "python": sys.version.split()[0],
            "torch": torch.__version__,
            "triton": triton.__version__,
            "cuda": torch.version.cuda,
        },
    }


def cpu_model_name() -> str:
    """The CPU's marketing name from /proc/cpuinfo where there is one, else the architecture."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def resolve_device(requested: str, devices: dict[str, Any], path: str | None) -> str:
    if requested == "auto":
        return "cuda" if devices["cuda_available"] else "cpu"
    if requested == "cuda" and not devices["cuda_available"]:
        raise DrtritonError(
            "--device cuda was asked for, but the worker sees no CUDA GPU",
            "run with --device cpu (verification under the Triton interpreter) or on a machine with a GPU",
            path=path,
        )
    return requested


def describe_device(device: str, devices: dict[str, Any]) -> dict[str, str]:
    if device == "cuda":
        return {"kind": "cuda", "name": devices["cuda_device_name"]}
    return {"kind": "cpu-interpreter", "name": devices["cpu_name"] or "cpu"}
