"""The socket transports are private: loopback TCP or a 0600 Unix socket, and nothing runs without the token.

Jobs run the document's code as the server's user, so whoever could use the server without the token could run
code as them. Hand-made messages (RawClient) play the stranger; pytest-lsp's client plays the editor.
"""

from __future__ import annotations

import asyncio
import socket
import stat
import subprocess
from pathlib import Path

import pytest
from lsp_helpers import EDITORS, TEST_SETTINGS, code_lenses, open_file
from lsprotocol import types
from pytest_lsp import client_capabilities, make_test_lsp_client
from socket_helpers import (
    REQUEST_FAILED,
    SERVER_NOT_INITIALIZED,
    RawClient,
    connect_session_client,
    free_port,
    initialize_params,
    private_token_file,
    server_command,
    session_settings,
)

from drtriton_lsp.server import socket_transport
from drtriton_lsp.server.auth_token import token_from_file
from drtriton_lsp.server.main import main
from drtriton_lsp.server.socket_transport import tcp_listen_addresses

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(autouse=True)
def main_never_serves(monkeypatch):
    """`main` here must refuse before it listens; were a refusal missing, the test fails instead of serving forever."""

    async def serve(*arguments):
        raise AssertionError("drtriton-lsp went on to listen where it should have refused")

    monkeypatch.setattr(socket_transport, "serve", serve)


@pytest.fixture
def tcp_server(tmp_path):
    """A server on a free loopback port with a token file: (address, token, process, its stderr log)."""
    token_file, token = private_token_file(tmp_path)
    port = free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            server_command("--tcp", f"127.0.0.1:{port}", "--token-file", str(token_file)), stderr=stderr
        )
    yield ("127.0.0.1", port), token, process, log
    if process.poll() is None:
        process.kill()
        process.wait()


def connect(address, process: subprocess.Popen) -> RawClient:
    return RawClient.connect(address, lambda: process.poll() is None)


def start_session(address, process: subprocess.Popen, token: str) -> RawClient:
    client = connect(address, process)
    client.request(1, "initialize", initialize_params(**session_settings(token)))
    assert "result" in client.response_to(1)
    client.notify("initialized", {})
    return client


def end_session(client: RawClient, process: subprocess.Popen) -> None:
    client.request(99, "shutdown")
    client.response_to(99)
    client.notify("exit")
    assert process.wait(timeout=30) == 0


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.1", "[::]"])
def test_tcp_refuses_an_address_other_machines_can_reach(host, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--tcp", f"{host}:2087"])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert f"refusing --tcp on {host}: other machines can reach that address" in error
    assert "add --allow-non-loopback on a network you trust" in error


@pytest.mark.parametrize("host", ["127.0.0.1", "127.5.6.7", "::1", "[::1]", "localhost"])
def test_tcp_accepts_loopback_addresses_and_binds_what_it_checked(host):
    addresses = tcp_listen_addresses(host, allow_non_loopback=False)
    assert addresses and all(address.startswith("127.") or address == "::1" for address in addresses)


def test_allow_non_loopback_lets_tcp_listen_beyond_loopback():
    assert tcp_listen_addresses("0.0.0.0", allow_non_loopback=True) == ["0.0.0.0"]


@pytest.mark.parametrize(
    "options, reason",
    [
        ({}, "initialize must carry initializationOptions.authToken"),
        ({"authToken": 12345}, "initialize must carry initializationOptions.authToken"),
        ({"authToken": "not-the-token"}, "initializationOptions.authToken is not this server's token"),
    ],
    ids=["missing", "not a string", "wrong"],
)
def test_a_missing_or_wrong_token_is_refused_and_the_connection_closed(tcp_server, options, reason):
    address, token, process, log = tcp_server
    stranger = connect(address, process)
    stranger.request(1, "initialize", initialize_params(**TEST_SETTINGS, **options))
    refusal = stranger.receive()
    assert refusal["id"] == 1 and refusal["error"]["code"] == REQUEST_FAILED
    assert refusal["error"]["message"].startswith(f"drtriton-lsp refused the connection: {reason}")
    assert refusal["error"]["data"] == {"retry": False}  # VS Code then offers no Retry button
    assert stranger.receive() is None, "the connection must be closed after a refusal"
    # The refused stranger neither ended the server nor took it: its owner still gets a session.
    owner = start_session(address, process, token)
    end_session(owner, process)


def test_requests_before_initialize_are_refused_and_notifications_dropped(tcp_server, tmp_path):
    address, token, process, log = tcp_server
    example = tmp_path / "model.py"
    example.write_text((EXAMPLES / "scaled_activation_chain.py").read_text())
    document = {"uri": example.as_uri(), "languageId": "python", "version": 1, "text": example.read_text()}
    client = connect(address, process)
    client.request(1, "workspace/executeCommand", {"command": "drtriton.printDebugInformation", "arguments": []})
    refusal = client.receive()
    assert refusal["id"] == 1 and refusal["error"]["code"] == SERVER_NOT_INITIALIZED
    assert "send initialize (with initializationOptions.authToken) first" in refusal["error"]["message"]
    client.notify("textDocument/didOpen", {"textDocument": document})
    # Once the token is sent, the session works, and the document opened before it was never seen.
    client.request(2, "initialize", initialize_params(**session_settings(token)))
    assert "result" in client.response_to(2)
    client.notify("initialized", {})
    client.request(3, "textDocument/codeLens", {"textDocument": {"uri": document["uri"]}})
    assert client.response_to(3)["result"] is None
    client.notify("textDocument/didOpen", {"textDocument": document})
    client.request(4, "textDocument/codeLens", {"textDocument": {"uri": document["uri"]}})
    assert [lens["command"]["title"] for lens in client.response_to(4)["result"]] == ["Generate Triton kernel"]
    end_session(client, process)


def test_a_second_client_is_refused_while_a_session_runs(tcp_server):
    address, token, process, log = tcp_server
    owner = start_session(address, process, token)
    second = connect(address, process)
    second.request(1, "initialize", initialize_params(**session_settings(token)))
    refusal = second.receive()
    assert "already serves an editor on this socket" in refusal["error"]["message"]
    assert second.receive() is None
    owner.request(2, "workspace/executeCommand", {"command": "drtriton.printDebugInformation", "arguments": []})
    assert '"drtriton-lsp"' in owner.response_to(2)["result"]
    end_session(owner, process)


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o620, 0o606])
def test_a_token_file_others_can_read_or_write_is_refused(tmp_path, capsys, mode):
    token_file, _ = private_token_file(tmp_path, mode)
    with pytest.raises(SystemExit) as exit_:
        main(["--tcp", "127.0.0.1:0", "--token-file", str(token_file)])
    assert exit_.value.code == 2
    error = capsys.readouterr().err
    assert f"the token file {token_file} can be read or written by group or others (mode {mode:04o})" in error
    assert f"run `chmod 600 {token_file}`" in error


def test_a_short_token_in_the_file_is_refused(tmp_path, capsys):
    token_file = tmp_path / "token"
    token_file.write_text("hunter2\n")
    token_file.chmod(0o600)
    with pytest.raises(SystemExit):
        main(["--socket", str(tmp_path / "lsp.sock"), "--token-file", str(token_file)])
    assert f"the token in {token_file} has 7 characters, too few to resist guessing" in capsys.readouterr().err
    assert not (tmp_path / "lsp.sock").exists()


def test_a_missing_token_file_is_created_private_with_a_new_token(tmp_path):
    token_file = tmp_path / "token"
    token, line = token_from_file(token_file)
    assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert token_file.read_text() == token + "\n" and len(token) >= 32
    assert token not in line
    assert token_from_file(token_file)[0] == token


@pytest.mark.asyncio
@pytest.mark.parametrize("editor", EDITORS)
async def test_unix_socket_is_private_and_serves_the_editor_with_the_token(editor, example_file, tmp_path):
    socket_path = tmp_path / "drtriton.sock"
    token_file, token = private_token_file(tmp_path)
    log = tmp_path / "server.log"
    with log.open("wb") as stderr:
        server = await asyncio.create_subprocess_exec(
            *server_command("--socket", str(socket_path), "--token-file", str(token_file), "--log-level", "DEBUG"),
            stderr=stderr,
        )
    client = make_test_lsp_client()
    try:
        await connect_session_client(client, socket_path, server)
        status = socket_path.stat()
        assert stat.S_ISSOCK(status.st_mode) and stat.S_IMODE(status.st_mode) == 0o600
        await client.initialize_session(
            types.InitializeParams(
                capabilities=client_capabilities(editor), initialization_options=session_settings(token)
            )
        )
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
    assert not socket_path.exists(), "the server removes its socket when it exits"
    logged = log.read_text()
    assert "Language server initialized" in logged  # pygls logs the initialize params at this level
    assert token not in logged


def test_unix_socket_refuses_a_path_that_is_not_a_socket(tmp_path, capsys):
    taken = tmp_path / "notes.txt"
    taken.write_text("mine")
    with pytest.raises(SystemExit):
        main(["--socket", str(taken)])
    assert f"{taken} exists and is not a socket; choose another --socket path" in capsys.readouterr().err
    assert taken.read_text() == "mine"


def test_unix_socket_refuses_a_path_where_a_server_listens(tmp_path, capsys):
    path = tmp_path / "busy.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as listening:
        listening.bind(str(path))
        listening.listen()
        with pytest.raises(SystemExit):
            main(["--socket", str(path)])
    assert f"another server listens on {path}" in capsys.readouterr().err


def test_unix_socket_replaces_a_stale_socket(tmp_path):
    path = tmp_path / "stale.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as gone:
        gone.bind(str(path))  # closed without removing its file, as after a crash
    bound = socket_transport.bind_unix_socket(path)
    try:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
    finally:
        bound.listening.close()
        bound.remove_file()
    assert not path.exists()


def test_token_and_transport_options_need_a_socket(capsys):
    with pytest.raises(SystemExit):
        main(["--token-file", "/tmp/token"])
    assert "--token-file applies to --socket and --tcp; stdio needs no token" in capsys.readouterr().err


@pytest.mark.asyncio
async def test_a_connection_that_does_not_authenticate_in_time_is_closed(monkeypatch):
    monkeypatch.setattr(socket_transport, "AUTHENTICATION_TIMEOUT_S", 0.2)

    class NeverAdmitted:  # no session is ever admitted here, so the gate never touches the server
        pass

    gate = socket_transport.TokenGate(NeverAdmitted(), "a-token-of-more-than-32-characters-xxxxxxx")
    listener = await asyncio.start_server(gate.handle_connection, "127.0.0.1", 0)
    async with listener:
        reader, writer = await asyncio.open_connection(*listener.sockets[0].getsockname()[:2])
        writer.write(b"Content-Length: 10\r\n")  # and then nothing
        assert await asyncio.wait_for(reader.read(), 5) == b""
        writer.close()
