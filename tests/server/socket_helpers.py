"""Steps the socket tests share: start `drtriton-lsp` on a socket, make a token file, and speak LSP over the socket.

`RawClient` sends hand-made messages (what an attacker could send); pytest-lsp's client plays the editor.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import socket
import sys
import time
from pathlib import Path

from lsp_helpers import TEST_SETTINGS
from pygls.io_ import run_async
from pytest_lsp import LanguageClient

START_TIMEOUT_S = 60
READ_TIMEOUT_S = 30
PRINTED_TOKEN = re.compile(r"clients must send initializationOptions\.authToken = (\S+)")
SERVER_NOT_INITIALIZED = -32002
REQUEST_FAILED = -32803

Address = tuple[str, int] | Path  # (host, port) for TCP, a path for a Unix socket


def server_command(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "drtriton_lsp.server.main", *arguments]


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def private_token_file(folder: Path, mode: int = 0o600) -> tuple[Path, str]:
    path = folder / "token"
    token = "a-test-token-of-more-than-32-characters-" + os.urandom(8).hex()
    path.write_text(token + "\n")
    path.chmod(mode)
    return path, token


def printed_token(log: Path, still_running) -> str:
    """The token a server without --token-file printed to its stderr (written to `log`)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline and still_running():
        found = PRINTED_TOKEN.search(log.read_text())
        if found:
            return found.group(1)
        time.sleep(0.1)
    raise AssertionError(f"the server printed no token:\n{log.read_text()}")


def initialize_params(**initialization_options) -> dict:
    return {"processId": None, "rootUri": None, "capabilities": {}, "initializationOptions": initialization_options}


class RawClient:
    """A blocking socket that frames JSON-RPC messages as the LSP base protocol does."""

    def __init__(self, connection: socket.socket) -> None:
        self.connection = connection
        self.connection.settimeout(READ_TIMEOUT_S)
        self.buffer = b""

    @classmethod
    def connect(cls, address: Address, server_running) -> RawClient:
        """Retry until the server listens (it imports pygls and lsprotocol first)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            family = socket.AF_UNIX if isinstance(address, Path) else socket.AF_INET
            connection = socket.socket(family, socket.SOCK_STREAM)
            try:
                connection.connect(str(address) if isinstance(address, Path) else address)
                return cls(connection)
            except OSError:
                connection.close()
                if not server_running() or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def send(self, message: dict) -> None:
        body = json.dumps({"jsonrpc": "2.0", **message}).encode()
        self.connection.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def request(self, request_id: int, method: str, params=None) -> None:
        self.send({"id": request_id, "method": method, "params": params})

    def notify(self, method: str, params=None) -> None:
        self.send({"method": method, "params": params})

    def receive(self) -> dict | None:
        """The next message from the server; None once the server has closed the connection."""
        while b"\r\n\r\n" not in self.buffer:
            if not self._read_more():
                return None
        headers, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        length = int(re.search(rb"Content-Length: (\d+)", headers).group(1))
        while len(self.buffer) < length:
            if not self._read_more():
                return None
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return json.loads(body)

    def response_to(self, request_id: int) -> dict:
        """The response to `request_id`, skipping what the server sends meanwhile (log messages, its own requests)."""
        while True:
            message = self.receive()
            assert message is not None, f"the server closed the connection before answering request {request_id}"
            if message.get("id") == request_id and "method" not in message:
                return message

    def _read_more(self) -> bool:
        chunk = self.connection.recv(65536)
        self.buffer += chunk
        return bool(chunk)

    def close(self) -> None:
        self.connection.close()


async def connect_session_client(client: LanguageClient, address: Address, server: asyncio.subprocess.Process) -> None:
    """Connect pytest-lsp's client over TCP or a Unix socket, retrying until the server listens."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while True:
        try:
            if isinstance(address, Path):
                reader, writer = await asyncio.open_unix_connection(address)
                break
            await client.start_tcp(*address)
            return
        except OSError:
            if server.returncode is not None or time.monotonic() > deadline:
                raise
            await asyncio.sleep(0.2)
    # What pygls's JsonRPCClient.start_tcp does, over the Unix socket's streams.
    client.protocol.set_writer(writer)
    client._async_tasks.append(
        asyncio.create_task(
            run_async(
                stop_event=client._stop_event,
                reader=reader,
                protocol=client.protocol,
                error_handler=client.report_server_error,
            )
        )
    )


def session_settings(token: str) -> dict:
    return {**TEST_SETTINGS, "authToken": token}
