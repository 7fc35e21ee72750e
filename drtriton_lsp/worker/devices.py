"""What hardware and software a worker sees: the answer to `capabilities`, and the `devices` a capture reports.

Runs in the worker (it imports torch); the caller decides from the answer with engine/devices.py's `resolve_device`.
"""

from __future__ import annotations

import os
import platform
import sys

from drtriton_lsp.runners.protocol import REMOTE_HOST_VARIABLE


def describe_devices() -> dict:
    """The devices and versions this worker sees; `host` too when it runs on a remote host (an ssh runner's)."""
    import torch
    import triton

    cuda = torch.cuda.is_available()
    remote_host = os.environ.get(REMOTE_HOST_VARIABLE)
    return {
        **({"host": remote_host} if remote_host else {}),
        "cuda_available": cuda,
        "cuda_device_name": torch.cuda.get_device_name(0) if cuda else None,
        "cuda_memory_bytes": torch.cuda.get_device_properties(0).total_memory if cuda else None,
        "cuda_device_count": torch.cuda.device_count() if cuda else 0,
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
