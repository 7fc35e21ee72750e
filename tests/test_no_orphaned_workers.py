"""No worker outlives what started it: the CLI killed during a hanging verification, the language server killed
during a job or while workers start ahead, and the server ending its session (with or without `shutdown`) leave no
process of theirs running 5 s later: no worker, nothing a worker started, no analysis process of the server.

The server is started as an editor would, with a minimal LSP exchange over stdio, so that a test can kill it.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import psutil
import pytest

from tests.conftest import FIXTURES
from tests.process_trees import alive_after, below

pytestmark = pytest.mark.slow

SPIN_S = 2  # a candidate process that has waited for its requests, then runs this long without a pause, is stuck

WORKER_MODULE = "drtriton_lsp.worker.main"
CANDIDATE_HOST_MODULE = "drtriton_lsp.worker.candidate_host"
VERIFY_FIXTURES = FIXTURES / "verify"


def runs_module(process: psutil.Process, module: str) -> bool:
    try:
        return module in process.cmdline()
    except psutil.Error:
        return False


def is_worker(process: psutil.Process) -> bool:
    return runs_module(process, WORKER_MODULE)


def worker_trees(pid: int) -> list[psutil.Process]:
    """The workers below `pid` and everything below them (their group guards, what their jobs started)."""
    trees = []
    for worker in filter(is_worker, below(pid)):
        trees += [worker, *below(worker.pid)]
    return trees


def wait_for_file(path: Path, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, f"{path.name} was not created in {timeout_s:.0f} s"
        time.sleep(0.1)


def wait_until_spinning(root: int, module: str, timeout_s: float = 120) -> None:
    """Until a process below `root` running `module`, once it has waited (for its requests: its start-up is done),
    runs without a pause for SPIN_S seconds: stuck in a loop."""
    deadline = time.monotonic() + timeout_s
    waited, running_since = set(), {}
    while time.monotonic() < deadline:
        for process in below(root):
            if not runs_module(process, module):
                continue
            try:
                status = process.status()
            except psutil.Error:
                continue
            if status != psutil.STATUS_RUNNING:
                waited.add(process)
                running_since.pop(process, None)
            elif process in waited and time.monotonic() - running_since.setdefault(process, time.monotonic()) > SPIN_S:
                return
        time.sleep(0.05)
    raise AssertionError(f"no {module} process spun for {SPIN_S} s within {timeout_s:.0f} s")


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_killing_the_cli_during_a_hanging_verification_leaves_no_worker(device, tmp_path, kill_at_end):
    cli = subprocess.Popen(
        [
            sys.executable, "-m", "drtriton_lsp.cli", "verify",
            str(VERIFY_FIXTURES / "task_scale_relu.py"), str(VERIFY_FIXTURES / "spins.py"),
            "--device", device, "--trials", "1",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    kill_at_end.add(psutil.Process(cli.pid))
    wait_until_spinning(cli.pid, CANDIDATE_HOST_MODULE)  # the worker's candidate process, in the candidate's forward
    workers = worker_trees(cli.pid)
    kill_at_end.update(below(cli.pid))
    assert any(runs_module(process, CANDIDATE_HOST_MODULE) for process in workers)

    cli.send_signal(signal.SIGKILL)
    cli.wait()
    assert alive_after(workers, 5) == []


class EditorConnection:
    """A language server over stdio, spoken to as a minimal editor would (no client capabilities, so the server
    asks nothing of it); the server's notifications are read and dropped."""

    def __init__(self, stderr_path: Path) -> None:
        with stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [sys.executable, "-m", "drtriton_lsp.server.main"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                stderr=stderr,
            )
        self._answers: queue.SimpleQueue[dict[str, Any]] = queue.SimpleQueue()
        self._ids = iter(range(1, 1_000_000))
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.process.stdout
        while True:
            length = None
            while (line := stream.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode("ascii").partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            if length is None:
                return  # the server closed its output
            message = json.loads(stream.read(length))
            if "id" in message and "method" not in message:
                self._answers.put(message)

    def _send(self, message: dict[str, Any]) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.process.stdin.write(f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
        self.process.stdin.flush()

    def notify(self, method: str, params: Any) -> None:
        self._send({"method": method, "params": params})

    def request(self, method: str, params: Any) -> Any:
        request_id = next(self._ids)
        self._send({"id": request_id, "method": method, "params": params})
        answer = self._answers.get(timeout=60)
        assert answer["id"] == request_id and "error" not in answer, answer
        return answer["result"]

    def start_session(self, **settings: Any) -> None:
        options = {"device": "cpu", "trials": 2, "warmWorker": False, **settings}
        self.request(
            "initialize", {"processId": os.getpid(), "rootUri": None, "capabilities": {}, "initializationOptions": options}
        )
        self.notify("initialized", {})

    def open(self, path: Path) -> str:
        uri = path.as_uri()
        self.notify(
            "textDocument/didOpen",
            {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": path.read_text()}},
        )
        return uri


@pytest.fixture
def server(tmp_path, kill_at_end) -> EditorConnection:
    connection = EditorConnection(tmp_path / "server-stderr.log")
    kill_at_end.add(psutil.Process(connection.process.pid))
    return connection


def wait_for_workers(server: EditorConnection, count: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while len(list(filter(is_worker, below(server.process.pid)))) < count:
        assert time.monotonic() < deadline, f"{count} workers did not start in {timeout_s:.0f} s"
        time.sleep(0.1)


def test_killing_the_server_while_workers_start_ahead_leaves_no_process(server, tmp_path, kill_at_end):
    # Killed while they still preload (import torch, warm up the exporter): a worker that already waits for its
    # job reads the end of its input when the server dies, and ends anyway.
    server.start_session(warmWorker=True)
    path = tmp_path / "shown.py"
    path.write_text((Path(__file__).parents[1] / "examples" / "scaled_activation_chain.py").read_text())
    uri = server.open(path)
    server.request("textDocument/codeLens", {"textDocument": {"uri": uri}})  # a shown target: workers start ahead
    wait_for_workers(server, 2)
    everything = below(server.process.pid)  # the workers, their guards, the server's analysis process
    kill_at_end.update(everything)
    server.process.send_signal(signal.SIGKILL)
    server.process.wait()
    assert alive_after(everything, 5) == []


# The capture imports the task, which runs this module's constant: a child process started, then a loop that never
# ends. The marker file tells the test the worker is in the loop.
SPINS_ON_IMPORT = """import subprocess
import sys

import torch
import torch.nn as nn


def spin():
    subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    open({marker!r}, "w").close()
    while True:
        pass


SCALE = spin()


# drtriton: inputs = [torch.randn(4, 8)]
class Spins(nn.Module):
    def forward(self, x):
        return x * SCALE
"""


@pytest.mark.parametrize("ending", ["SIGKILL", "exit without shutdown", "shutdown"])
def test_the_server_ending_during_a_job_leaves_no_process(ending, server, tmp_path, kill_at_end):
    server.start_session()
    marker = tmp_path / "capture-is-spinning"
    path = tmp_path / "spins.py"
    path.write_text(SPINS_ON_IMPORT.format(marker=str(marker)))
    uri = server.open(path)
    generate = {"command": "drtriton.generate", "arguments": [{"uri": uri, "target": "Spins"}]}
    assert server.request("workspace/executeCommand", generate)["status"] == "started"
    wait_for_file(marker, 60)
    workers = worker_trees(server.process.pid)
    assert len(workers) >= 3  # the capture's worker, its guard, and the child the task started
    everything = below(server.process.pid)  # and the server's analysis process
    kill_at_end.update(everything)

    if ending == "SIGKILL":
        server.process.send_signal(signal.SIGKILL)
    elif ending == "exit without shutdown":
        server.notify("exit", None)
        server.process.wait(timeout=10)
    else:
        server.request("shutdown", None)
        assert alive_after(workers, 5) == []  # stopped by the server itself, which still runs
        assert server.process.poll() is None
        server.notify("exit", None)
        server.process.wait(timeout=10)
    assert alive_after(everything, 5) == []
