"""Run one job in a fresh local worker process, watched for time, memory and cancellation.

Each call starts its own `python -m drtriton_lsp.runners.worker`, so a kernel that segfaults,
hangs or eats memory ends that process and is reported as a named `JobFailure`.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable

import psutil

from drtriton_lsp.errors import DrtritonError, WorkerError
from drtriton_lsp.runners import protocol

DEFAULT_MEMORY_LIMIT_BYTES = 8 * 1024**3
WATCH_INTERVAL_S = 0.1
STDERR_LINES_KEPT = 60


class JobFailure(Exception):
    """The job's process did not return a result.

    reason: "timeout" | "crashed" | "memory_limit" | "cancelled" | "worker_error".
    """

    def __init__(self, reason: str, detail: str, stderr_tail: str = ""):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail
        self.stderr_tail = stderr_tail


@dataclass
class JobLimits:
    """timeout_s: wall-clock seconds; memory_bytes: resident memory of the worker and its children."""

    timeout_s: float = 300.0
    memory_bytes: int = DEFAULT_MEMORY_LIMIT_BYTES


@dataclass
class LocalRunner:
    """Starts workers with this interpreter; `extra_env` and `python_path` shape their environment."""

    python: str = sys.executable
    extra_env: dict[str, str] = field(default_factory=dict)

    def call(
        self,
        method: str,
        params: dict[str, Any],
        *,
        limits: JobLimits | None = None,
        env: dict[str, str | None] | None = None,
        python_path: list[str] | None = None,
        on_progress: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> Any:
        """Run `method` in a new worker and return its result, or raise JobFailure / DrtritonError."""
        limits = limits or JobLimits()
        process_env = dict(os.environ)
        process_env.update(self.extra_env)
        for name, value in (env or {}).items():
            if value is None:
                process_env.pop(name, None)  # None removes a variable inherited from the caller
            else:
                process_env[name] = value
        process_env["PYTHONUNBUFFERED"] = "1"
        if python_path:
            existing = process_env.get("PYTHONPATH")
            process_env["PYTHONPATH"] = os.pathsep.join(python_path + ([existing] if existing else []))
        process = subprocess.Popen(
            [self.python, "-m", "drtriton_lsp.runners.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=process_env,
            start_new_session=True,  # its own process group: a kill takes every child with it
        )
        watch = _Watch(process, limits, cancel)
        stderr_lines: deque[str] = deque(maxlen=STDERR_LINES_KEPT)
        stderr_reader = threading.Thread(target=_drain, args=(process.stderr, stderr_lines), daemon=True)
        stderr_reader.start()
        watcher = threading.Thread(target=watch.run, daemon=True)
        watcher.start()
        try:
            protocol.write_message(process.stdin, protocol.request(1, method, params))
            protocol.write_message(process.stdin, protocol.request(2, "shutdown", {}))
        except (BrokenPipeError, OSError):
            pass  # the worker died at start-up; the exit status below says why
        response = None
        try:
            while True:
                message = protocol.read_message(process.stdout)
                if message is None:
                    break
                if message.get("method") == "progress" and on_progress is not None:
                    on_progress(message["params"]["message"])
                elif message.get("id") == 1:
                    response = message
        except BaseException:
            watch.kill_now()  # Ctrl-C or an error in the caller: never leave a worker behind
            raise
        process.wait()
        watch.stop()
        stderr_reader.join(timeout=5)
        stderr_tail = "".join(stderr_lines)
        if watch.verdict is not None:
            raise JobFailure(watch.verdict, watch.detail, stderr_tail)
        if response is None:
            raise JobFailure("crashed", _describe_exit(process.returncode), stderr_tail)
        if "error" in response:
            error = response["error"]
            if error["code"] == protocol.USER_ERROR:
                data = error.get("data") or {}
                raise DrtritonError(
                    data.get("message", error["message"]), data.get("hint", ""), path=data.get("path"), line=data.get("line")
                )
            detail = (error.get("data") or {}).get("traceback", error["message"])
            raise WorkerError(f"the worker failed in {method}: {error['message']}", detail)
        return response["result"]


class _Watch:
    """Kills the worker's process group on timeout, memory overuse or cancellation."""

    def __init__(self, process: subprocess.Popen, limits: JobLimits, cancel: threading.Event | None):
        self.process = process
        self.limits = limits
        self.cancel = cancel
        self.verdict: str | None = None
        self.detail = ""
        self._stopped = threading.Event()

    def stop(self) -> None:
        self._stopped.set()

    def kill_now(self) -> None:
        self.stop()
        self._kill("cancelled", "interrupted")

    def run(self) -> None:
        started = time.monotonic()
        while not self._stopped.wait(WATCH_INTERVAL_S):
            if self.process.poll() is not None:
                return
            if self.cancel is not None and self.cancel.is_set():
                self._kill("cancelled", "cancelled by the user")
                return
            elapsed = time.monotonic() - started
            if elapsed > self.limits.timeout_s:
                self._kill("timeout", f"no result after {self.limits.timeout_s:.0f} s (a hang, or a job too large)")
                return
            resident = _tree_resident_bytes(self.process.pid)
            if resident > self.limits.memory_bytes:
                self._kill(
                    "memory_limit",
                    f"used {resident / 1024**3:.1f} GiB, over the {self.limits.memory_bytes / 1024**3:.1f} GiB limit",
                )
                return

    def _kill(self, verdict: str, detail: str) -> None:
        self.verdict = verdict
        self.detail = detail
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _tree_resident_bytes(pid: int) -> int:
    try:
        parent = psutil.Process(pid)
        processes = [parent] + parent.children(recursive=True)
    except psutil.Error:
        return 0
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.Error:
            continue
    return total


def _drain(stream, sink: deque[str]) -> None:
    for line in stream:
        sink.append(line)


def _describe_exit(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (an out-of-bounds memory access in a kernel?)" if name == "SIGSEGV" else ""
        return f"the worker process was killed by {name}{hint}"
    return f"the worker process exited with status {returncode} without answering"
