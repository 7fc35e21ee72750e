"""Shared test configuration: the GPU marker is skipped on machines without CUDA; an sshd for the remote tests.

Tests that need the language's own interpreter set TRITON_INTERPRET themselves (workers get it from the runner).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Iterator

import psutil
import pytest

from drtriton_lsp.compiler import aten_schemas
from drtriton_lsp.worker.op_schemas import read_schema
from tests.ssh_server import SshServer, start_ssh_server

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
EXAMPLES = REPO / "examples"

# tests build graphs in this process (captured, read from fixtures, written by hand), not through a capture worker that
# sends their ops' schemas: the compiler reads those from torch here
aten_schemas.read_unknown_ops_with(read_schema)


def _cuda_available() -> bool:
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    if _cuda_available():
        return
    skip_gpu = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip_gpu)


@pytest.fixture
def example_copy(tmp_path):
    """Copy an example into a temporary folder, so write-back tests never touch the repo."""

    def copy(name: str) -> Path:
        destination = tmp_path / name
        shutil.copy(EXAMPLES / name, destination)
        return destination

    return copy


@pytest.fixture
def started_workers(monkeypatch) -> list[subprocess.Popen]:
    """Every process started in the test (the runners' workers), in order, as the runner holds them."""
    started: list[subprocess.Popen] = []
    real_popen = subprocess.Popen

    def recording_popen(*args, **kwargs):
        started.append(real_popen(*args, **kwargs))
        return started[-1]

    monkeypatch.setattr(subprocess, "Popen", recording_popen)
    return started


@pytest.fixture
def kill_at_end() -> Iterator[set[psutil.Process]]:
    """The processes a test adds here are killed at its end with everything below them, whatever its outcome:
    a test that kills a caller to see what it leaves running must leave nothing running itself."""
    processes: set[psutil.Process] = set()
    yield processes
    everything = set(processes)
    for process in processes:
        try:
            everything.update(process.children(recursive=True))
        except psutil.Error:
            continue
    for process in everything:
        try:
            process.kill()
        except psutil.Error:
            continue


@pytest.fixture(scope="session")
def ssh_server(tmp_path_factory) -> Iterator[SshServer]:
    """One sshd for the session's remote tests (skipped where sshd is not installed)."""
    server = start_ssh_server(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture
def remote_ssh(ssh_server, monkeypatch) -> SshServer:
    """The test sshd, reachable by its host alias: drtriton's ssh client (and any process started in the test,
    a language server included) uses the test's ssh config."""
    from drtriton_lsp.runners.ssh import SSH_COMMAND_VARIABLE

    monkeypatch.setenv(SSH_COMMAND_VARIABLE, ssh_server.ssh_command)
    return ssh_server
