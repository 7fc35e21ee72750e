"""`workspace/executeCommand` drtriton.printDebugInformation: versions, settings, model, devices, workers, jobs.

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
from drtriton_lsp.runners.local import JobFailure, JobLimits, LocalRunner
from drtriton_lsp.server.language_server import DrtritonLanguageServer

PRINT_DEBUG_INFORMATION = "drtriton.printDebugInformation"
CAPABILITIES_TIMEOUT_S = 120


def register(server: DrtritonLanguageServer) -> None:
    @server.command(PRINT_DEBUG_INFORMATION)
    async def print_debug_information(ls: DrtritonLanguageServer, *arguments: Any) -> str:
        information = {
            "versions": {
                "drtriton-lsp": ls.version,
                "pygls": version("pygls"),
                "lsprotocol": version("lsprotocol"),
                "python": platform.python_version(),
            },
            "settings": dataclasses.asdict(ls.settings),
            "model": await asyncio.to_thread(backend_status, ls.settings.model),
            "devices": await asyncio.to_thread(_worker_devices),
            "analysis": await ls.analyses.status(),
            "jobs": [job.describe() for job in ls.jobs.jobs.values()],
            "documents_with_results": ls.results.documents(),
        }
        text = json.dumps(information, indent=2)
        ls.log(f"drtriton debug information:\n{text}", types.MessageType.Info)
        return text


def _worker_devices() -> dict[str, Any]:
    """What a worker process sees (torch, Triton, CUDA); the server itself never imports torch."""
    try:
        return LocalRunner().call("capabilities", {}, limits=JobLimits(timeout_s=CAPABILITIES_TIMEOUT_S))
    except (JobFailure, DrtritonError) as failure:
        return {"error": f"the capabilities worker failed: {failure}"}
