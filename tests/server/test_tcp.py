"""`drtriton-lsp --tcp HOST:PORT`: the same server on a loopback socket, for the editor that sends the token.

pytest-lsp's client connects over TCP itself; the server process is started and watched here.
"""

from __future__ import annotations

import asyncio

import pytest
from lsp_helpers import EDITORS, code_lenses, open_file
from lsprotocol import types
from pytest_lsp import client_capabilities, make_test_lsp_client
from socket_helpers import connect_session_client, free_port, printed_token, server_command, session_settings

from drtriton_lsp.server.main import main


@pytest.mark.asyncio
@pytest.mark.parametrize("editor", EDITORS)
async def test_tcp_serves_a_session_with_the_printed_token_and_exits_on_request(editor, example_file, tmp_path):
    port = free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as stderr:
        server = await asyncio.create_subprocess_exec(*server_command("--tcp", f"127.0.0.1:{port}"), stderr=stderr)
    client = make_test_lsp_client()
    try:
        token = await asyncio.to_thread(printed_token, log, lambda: server.returncode is None)
        await connect_session_client(client, ("127.0.0.1", port), server)
        result = await client.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities(editor), initialization_options=session_settings(token)
            )
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
