"""`drtriton-lsp --tcp HOST:PORT`: the same server on a socket (an editor or a debugger connects to it).

pytest-lsp's client connects over TCP itself; the server process is started and watched here.
"""

from __future__ import annotations

import asyncio
import socket
import sys
import time

import pytest
from lsp_helpers import EDITORS, TEST_SETTINGS, code_lenses, open_file
from lsprotocol import types
from pytest_lsp import client_capabilities, make_test_lsp_client

from drtriton_lsp.server.main import main

START_TIMEOUT_S = 60


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


async def connect(client, port: int, server: asyncio.subprocess.Process) -> None:
    """Retry until the server listens (it imports pygls and lsprotocol first)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            await client.start_tcp("127.0.0.1", port)
            return
        except OSError:
            if server.returncode is not None or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)


@pytest.mark.asyncio
@pytest.mark.parametrize("editor", EDITORS)
async def test_tcp_serves_a_session_and_exits_on_request(editor, example_file):
    port = free_port()
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "drtriton_lsp.server.main", "--tcp", f"127.0.0.1:{port}"
    )
    client = make_test_lsp_client()
    try:
        await connect(client, port, server)
        result = await client.initialize_session(
            types.InitializeParams(capabilities=client_capabilities(editor), initialization_options=TEST_SETTINGS)
        )
        assert result.server_info.name == "drtriton-lsp"
        uri = open_file(client, example_file())
        assert [lens.command.title for lens in await code_lenses(client, uri)] == ["Generate Triton kernel"]
        await client.shutdown_session()
        assert await asyncio.wait_for(server.wait(), 30) == 0
        assert client.error is None, client.error
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
        await client.stop()


def test_tcp_option_wants_host_and_port(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--tcp", "2087"])
    assert exit_.value.code == 2
    assert "--tcp wants HOST:PORT, e.g. 127.0.0.1:2087, not '2087'" in capsys.readouterr().err
