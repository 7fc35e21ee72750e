"""The candidate's process as the judge sees it: requests answered within time limits, every message checked.

Torch-free, so a verification worker can start the candidate's interpreter (seconds of imports) before its own imports,
and keep processes started ahead for the next verification (`start_ahead`, `take`).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psutil

from drtriton_lsp.runners.local import describe_exit

COMPILE_LIMIT_S = 600.0  # one kernel's compilation
HOST_START_LIMIT_S = 180.0  # the candidate's process importing torch and Triton (not the candidate's doing)
MESSAGE_LIMIT_BYTES = 1 << 20
# On the CPU, where each call is Triton's interpreter on one core, a verification runs its odd-size, no-op and
# full-size checks at the same time as the primary trials, in a second candidate process (worker.judge.Judge).
SIDE_PROCESS_ON_CPU = True


class Rejected(Exception):
    """The candidate failed a check: `reason` is a stable code, `detail` says what was seen."""

    def __init__(self, reason: str, detail: str):
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


class CandidateProcess:
    """The candidate's process: requests answered within time limits, everything it says checked before use.
    `exchange` is the private folder (mode 0700) where the judge leaves tensors for it and it leaves outputs."""

    def __init__(self) -> None:
        self.exchange = Path(tempfile.mkdtemp(prefix="drtriton-exchange-"))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "drtriton_lsp.worker.candidate_host", str(self.exchange)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            cwd=self.exchange,
            text=True,
            env=_environment(),
        )
        self.messages: queue.Queue = queue.Queue()
        self.ready = False
        self.next_id = 0
        self.sent_at = 0.0
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.messages.put(line)
        self.messages.put(None)

    def wait_ready(self) -> None:
        message = self._next(time.monotonic() + HOST_START_LIMIT_S, "starting")
        if message.get("event") != "ready":
            raise Rejected("protocol_violation", f"the candidate's process said {str(message)[:200]} before it was ready")
        self.ready = True

    def request(self, op: str, params: dict[str, Any], limit_s: float, doing: str) -> dict[str, Any]:
        """Send one request and return its result; a candidate error raises Rejected with the candidate's kind."""
        self.send(op, params)
        return self.answer(limit_s, doing)

    def send(self, op: str, params: dict[str, Any]) -> None:
        """Send one request without waiting: `answer` waits for its result (the judge works meanwhile). A process
        still starting reads it once ready (the pipe holds it)."""
        self.next_id += 1
        try:
            self.process.stdin.write(json.dumps({"id": self.next_id, "op": op, **params}) + "\n")
            self.process.stdin.flush()
        except OSError:
            raise Rejected("crashed", self._exit_description()) from None
        self.sent_at = time.monotonic()

    def answer(self, limit_s: float, doing: str) -> dict[str, Any]:
        """The result of the request last sent, within `limit_s` of its sending (compile time not counted)."""
        if not self.ready:
            self.wait_ready()
            self.sent_at = time.monotonic()  # the request waited in the pipe until the process could read it
        deadline = self.sent_at + limit_s
        while True:
            message = self._next(deadline, doing, limit_s)
            event = message.get("event")
            if event == "compiling":
                compile_started = time.monotonic()
                done = self._next(compile_started + COMPILE_LIMIT_S, "compiling a Triton kernel", COMPILE_LIMIT_S)
                if done.get("event") != "compiled":
                    raise Rejected("protocol_violation", "the candidate's process did not report a compile's end")
                deadline += time.monotonic() - compile_started  # compile time is not the call's
                continue
            if message.get("id") != self.next_id or ("result" in message) == ("error" in message):
                raise Rejected("protocol_violation", f"unexpected message from the candidate's process: {str(message)[:200]}")
            if "error" in message:
                error = message["error"]
                kind = error.get("kind") if isinstance(error, dict) else None
                if kind not in ("import_error", "no_model_new", "runtime_error", "compile_error", "device_fault"):
                    raise Rejected("protocol_violation", f"an error of unknown kind {kind!r}")
                raise Rejected(kind, f"{doing}: {str(error.get('message', ''))[:2000]}")
            if not isinstance(message["result"], dict):
                raise Rejected("protocol_violation", "a result that is not an object")
            return message["result"]

    def _next(self, deadline: float, doing: str, limit_s: float | None = None) -> dict[str, Any]:
        try:
            line = self.messages.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            self.kill()
            limit = f" in {limit_s:.0f} s" if limit_s else ""
            raise Rejected("timeout", f"{doing}: no answer{limit} (a hang?)") from None
        if line is None:
            self.process.wait()
            raise Rejected("crashed", f"{doing}: {self._exit_description()}")
        if len(line) > MESSAGE_LIMIT_BYTES:
            raise Rejected("protocol_violation", "an oversized message from the candidate's process")
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            raise Rejected("protocol_violation", f"a message that is not JSON: {line[:200]!r}") from None
        if not isinstance(message, dict):
            raise Rejected("protocol_violation", "a message that is not an object")
        return message

    def _exit_description(self) -> str:
        return describe_exit(self.process.poll(), "the candidate's process")

    def kill(self) -> None:
        """End the process and anything it started."""
        try:
            children = psutil.Process(self.process.pid).children(recursive=True)
        except psutil.Error:
            children = []
        for process in [*children]:
            try:
                process.kill()
            except psutil.Error:
                pass
        self.process.kill()
        self.process.wait()

    def close(self) -> None:
        if self.process.poll() is None:
            try:
                self.process.stdin.write(json.dumps({"op": "exit"}) + "\n")
                self.process.stdin.flush()
                self.process.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                pass
        if self.process.poll() is None:
            self.kill()


# The environment variable a written-back dispatch reads before it replays a CUDA graph ("0": never).
REPLAY_SWITCH = "DRTRITON_CUDA_GRAPHS"


def _environment() -> dict[str, str]:
    """The candidate's process environment: this one's, with drtriton importable from its own folder (it starts in
    the exchange folder, and drtriton may run from a source checkout); on the CPU (Triton's interpreter), one thread
    for each numerical library, as the judge's processes run side by side and each interpreter call uses one core.
    A written-back dispatch's CUDA-graph replay is off there but in the replay trials (candidate_host.ReplayCounter)."""
    package_root = str(Path(__file__).resolve().parents[2])
    existing = os.environ.get("PYTHONPATH")
    environment = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([package_root, *([existing] if existing else [])]),
        REPLAY_SWITCH: "0",
    }
    if os.environ.get("TRITON_INTERPRET") == "1":
        environment.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return environment


_started_ahead: list[CandidateProcess] = []


def processes_for_device(device_type: str) -> int:
    """How many candidate processes a verification on this device type uses."""
    return 2 if device_type == "cpu" and SIDE_PROCESS_ON_CPU else 1


def start_ahead(count: int) -> None:
    """Have `count` clean candidate processes waiting for the next verification (their torch and Triton imports
    take seconds; each stays clean until a verification hands it its candidate)."""
    while len(_started_ahead) < count:
        _started_ahead.append(CandidateProcess())


def take() -> CandidateProcess:
    """A candidate process started ahead, or a new one."""
    return _started_ahead.pop(0) if _started_ahead else CandidateProcess()
