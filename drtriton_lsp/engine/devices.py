"""Which device a job should use, decided in the caller from what a worker sees (worker/devices.py answers that).

`resolve_device` picks or refuses one, `likely_device` guesses one without starting CUDA, `describe_device` reports it.
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass
from typing import Any

from drtriton_lsp.errors import DrtritonError


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
