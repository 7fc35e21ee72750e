"""`workspace/executeCommand` drtriton.printDebugInformation: versions, settings, model, the remote host, devices,
jobs.

Returned as text and written to the log (VS Code: the server's Output channel; Neovim: `:LspLog`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import platform
from importlib.metadata import version
from typing import Any

from lsprotocol import types

from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.models.backends import backend_status
from drtriton_lsp.runners.choice import runner_for
from drtriton_lsp.runners.runner import JobFailure, JobLimits
from drtriton_lsp.server.language_server import DrtritonLanguageServer
from drtriton_lsp.server.settings import Settings

PRINT_DEBUG_INFORMATION = "drtriton.printDebugInformation"
CAPABILITIES_TIMEOUT_S = 120


def register(server: DrtritonLanguageServer) -> None:
    @server.command(PRINT_DEBUG_INFORMATION)
    async def print_debug_information(ls: DrtritonLanguageServer, *arguments: Any) -> str:
        devices = await asyncio.to_thread(_worker_devices, ls.settings)
        information = {
            "versions": {
                "drtriton-lsp": ls.version,
                "pygls": version("pygls"),
                "lsprotocol": version("lsprotocol"),
                "python": platform.python_version(),
            },
            "settings": dataclasses.asdict(ls.settings),
            "model": await asyncio.to_thread(backend_status, ls.settings.model),
            "remote": _remote_status(ls.settings, devices),
            "devices": devices,
            "analysis": await ls.analyses.status(),
            "jobs": [job.describe() for job in ls.jobs.jobs.values()],
            "documents_with_results": ls.results.documents(),
        }
        text = json.dumps(information, indent=2)
        ls.log(f"drtriton debug information:\n{text}", types.MessageType.Info)
        return text


def _worker_devices(settings: Settings) -> dict[str, Any]:
    """What a worker process sees (torch, Triton, CUDA), where jobs run (this machine or the remote host); the
    server itself never imports torch."""
    try:
        with runner_for(settings.remote, settings.remotePython) as runner:
            return runner.call("capabilities", {}, limits=JobLimits(timeout_s=CAPABILITIES_TIMEOUT_S))
    except JobFailure as failure:
        return {"error": f"the capabilities worker failed: {failure}", "what_to_check": failure.hint}
    except DrtritonError as failure:
        return {"error": f"the capabilities worker failed: {failure}"}


def _remote_status(settings: Settings, devices: dict[str, Any]) -> dict[str, Any] | None:
    """The remote host jobs run on, and whether a worker there answered (None: jobs run on this machine)."""
    if not settings.remote:
        return None
    return {
        "address": settings.remote,
        "python": settings.remotePython,
        "answers": "error" not in devices,
        "host_name": devices.get("host"),
    }
