"""The remote end of an ssh runner: `ssh HOST -- PYTHON -m drtriton_lsp.runners.remote_worker` runs this host, which
starts `drtriton worker`, relays the caller's requests to it, enforces the job's memory limit, and says how it ended.

Why a host between ssh and the worker:
- ssh's exit status 255 means both "the connection was lost" and "the remote command was killed by a signal"; the
  host outlives its worker and reports the worker's exit (`worker_exit`, the last message on the channel), so the
  caller tells a crash from a lost connection: no `worker_exit` means the connection ended first.
- The caller's memory limit cannot be measured from the caller's side of ssh; the host measures the worker's tree.
- Nothing runs on after the session ends. The host is tied to its sshd session process (it ends with it, e.g. when
  the connection drops), the worker to the host (runners.lifetime), and what the worker starts (the verifier's
  candidate process) to the worker's group. The end of the caller's input (the channel closed while the connection
  lives on, as with ssh's connection sharing) ends the worker too: the host reads that input, even mid-job.
"""

from __future__ import annotations

import json
import os
import platform
import signal
import subprocess
import sys
import threading
from dataclasses import dataclass
from typing import IO

from drtriton_lsp.runners import lifetime, protocol
from drtriton_lsp.runners.local import WATCH_INTERVAL_S, WORKER_MODULE, memory_limit_detail, tree_resident_bytes
from drtriton_lsp.runners.runner import JobLimits


@dataclass
class _Limits:
    """The job's memory cap on this host, from the limits the caller last sent; None: not sent yet (a spare waiting
    for its job)."""

    memory_cap: int | None = None


def relay_requests(source: IO[str], worker: subprocess.Popen, limits: _Limits) -> None:
    """Pass each line of the caller's input to the worker, keeping the limits it sends; at the end of that input
    the caller is gone (a closed channel, a lost connection): kill the worker's group, whatever it is doing."""
    for line in source:
        message = _message(line)
        if message is not None and message.get("method") == protocol.SET_LIMITS:
            limits.memory_cap = JobLimits(memory_bytes=message["params"]["memory_bytes"]).memory_cap()
            continue
        try:
            worker.stdin.write(line)
            worker.stdin.flush()
        except OSError:
            return  # the worker has ended; the main thread reports how
    _kill_group(worker)


def watch_worker(worker: subprocess.Popen, limits: _Limits) -> dict:
    """Wait for the worker to end, killing its group if its processes' memory goes over the limit; how it ended."""
    while True:
        try:
            worker.wait(timeout=WATCH_INTERVAL_S)
            return {"returncode": worker.returncode}
        except subprocess.TimeoutExpired:
            pass
        if limits.memory_cap is None:
            continue
        resident = tree_resident_bytes(worker.pid)
        if resident > limits.memory_cap:
            _kill_group(worker)
            worker.wait()
            return {
                "returncode": worker.returncode,
                "verdict": "memory_limit",
                "detail": memory_limit_detail(resident, limits.memory_cap),
            }


def _message(line: str) -> dict | None:
    try:
        message = json.loads(line)
    except ValueError:
        return None  # not ours to judge: the worker answers what it cannot read
    return message if isinstance(message, dict) else None


def _kill_group(worker: subprocess.Popen) -> None:
    try:
        os.killpg(worker.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def main() -> int:
    lifetime.end_with_parent()  # the parent is the ssh session's sshd process: a lost connection ends this host
    worker = lifetime.start_child(
        [sys.executable, "-m", WORKER_MODULE],
        stdin=subprocess.PIPE,
        text=True,
        env={**os.environ, protocol.REMOTE_HOST_VARIABLE: platform.node()},
    )
    # The worker writes its answers to this process's stdout (inherited); this process writes only once it has ended.
    limits = _Limits()
    threading.Thread(target=relay_requests, args=(sys.stdin, worker, limits), daemon=True).start()
    ended = watch_worker(worker, limits)
    try:
        protocol.write_message(sys.stdout, protocol.notification(protocol.WORKER_EXIT, ended))
    except OSError:
        pass  # the channel is gone: nobody is left to tell
    return 0


if __name__ == "__main__":
    # Without the interpreter's teardown: the relay thread may still be blocked reading the caller's input.
    os._exit(main())
