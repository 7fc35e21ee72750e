"""What hardware and software a worker sees, and which device a job should use.

`describe_devices` runs in a worker (it imports torch); the parent gets its answer through the
`capabilities` or `capture` methods and decides with `resolve_device`.
"""

from __future__ import annotations

import glob
import os
import platform
import sys
from dataclasses import dataclass
from typing import Any

from drtriton_lsp.errors import DrtritonError
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


@dataclass(frozen=True)
class DeviceOption:
    """How the user picks the device, so that a refusal names it in their terms (a CLI flag, an editor setting).

    chosen: how a choice reads, e.g. "--device {device} was asked for"; change: how to choose another,
    e.g. "run with --device {device}". Both are format strings with one field, `device`.
    """

    chosen: str
    change: str

    def reads(self, device: str) -> str:
        return self.chosen.format(device=device)

    def to_choose(self, device: str) -> str:
        return self.change.format(device=device)


COMMAND_LINE_DEVICE = DeviceOption(chosen="--device {device} was asked for", change="run with --device {device}")


def resolve_device(
    requested: str, devices: dict[str, Any], path: str | None, option: DeviceOption = COMMAND_LINE_DEVICE
) -> str:
    """"cuda" or "cpu" for the requested "auto" | "cpu" | "cuda"; refuses CUDA the worker does not see."""
    if requested == "auto":
        return "cuda" if devices["cuda_available"] else "cpu"
    if requested == "cuda" and not devices["cuda_available"]:
        raise DrtritonError(
            f"{option.reads('cuda')}, but the worker sees no CUDA GPU",
            f"{option.to_choose('cpu')} for verification under the Triton interpreter, or use a machine with a GPU",
            path=path,
        )
    return requested


def likely_device(requested: str, remote: bool = False) -> str:
    """The device `resolve_device` will most likely pick, guessed in the caller without starting CUDA there:
    "auto" is "cuda" when an NVIDIA device node is present and CUDA_VISIBLE_DEVICES does not hide it, and on a
    remote host (one is chosen for its GPU). Only good for starting a worker ahead of time; a wrong guess costs
    that worker, never a wrong device."""
    if requested != "auto":
        return requested
    if remote:
        return "cuda"
    hidden = os.environ.get("CUDA_VISIBLE_DEVICES") in ("", "-1")
    return "cuda" if not hidden and glob.glob("/dev/nvidia[0-9]*") else "cpu"


def describe_device(device: str, devices: dict[str, Any]) -> dict[str, str]:
    """The report's `device`: kind and name, and the host's name when the worker ran on a remote host."""
    host = {"host": devices["host"]} if devices.get("host") else {}
    if device == "cuda":
        return {"kind": "cuda", "name": devices["cuda_device_name"], **host}
    return {"kind": "cpu-interpreter", "name": devices["cpu_name"] or "cpu", **host}
