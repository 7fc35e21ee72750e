"""JSON-RPC 2.0 messages between a caller and a `drtriton worker`, one JSON object per line.

Requests carry `id`; the worker answers each with exactly one response (`result` or `error`)
and may send `progress` notifications (no `id`) while it works.
"""

from __future__ import annotations

import json
from typing import IO, Any

PROTOCOL_VERSION = 1

# JSON-RPC error codes: the standard ones, plus one for a user-facing DrtritonError.
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
USER_ERROR = 1

# Between an ssh runner and the remote worker's host (runners/remote_worker.py), which relays everything else:
# the caller's limits for the job (a notification the host keeps), and how the worker ended (sent by the host last).
SET_LIMITS = "limits"
WORKER_EXIT = "worker_exit"
# Set by the remote worker's host for its worker: the host's name, which the worker adds to the devices it describes.
REMOTE_HOST_VARIABLE = "DRTRITON_REMOTE_HOST"
# Set by a caller for the workers that share one GPU (bench's side-by-side problems, training's judges): the lock file
# worker/gpu_lock.py takes, so verifications run together and each timing alone.
GPU_LOCK_VARIABLE = "DRTRITON_GPU_LOCK"
# The CPUs a worker (and every process it starts) runs on, as "0,1,2,3": set by `bench --jobs N`, which gives each of
# its N problems at a time CPUs of its own, so that one problem's compiles and captures never slow another's timing.
CPU_SET_VARIABLE = "DRTRITON_CPUS"


def request(request_id: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


def result_response(request_id: int, result: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: int | None, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": request_id, "error": error}


def notification(method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "method": method, "params": params}


def write_message(stream: IO[str], message: dict[str, Any]) -> None:
    stream.write(json.dumps(message, separators=(",", ":")) + "\n")
    stream.flush()


def read_message(stream: IO[str]) -> dict[str, Any] | None:
    """The next message, or None at end of stream. Blank lines are skipped."""
    while True:
        line = stream.readline()
        if not line:
            return None
        line = line.strip()
        if line:
            return json.loads(line)
