"""The server on a socket (TCP on loopback, or a Unix socket): only a client that sends the token gets a session.

Jobs run the document's code as the server's user, so a connection is served only once its `initialize` carries
`initializationOptions.authToken`; stdio needs none, the editor owns both ends. The check sits in front of pygls:
its protocol object is shared by every connection (pygls's own `start_tcp` gives each new connection the protocol's
writer and stops the server when any connection ends), so a refused connection must never reach it.
"""

from __future__ import annotations

import asyncio
import hmac
import ipaddress
import json
import logging
import os
import socket
import stat
import threading
from pathlib import Path
from typing import Any, Awaitable, Callable, NamedTuple

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.io_ import run_async
from pygls.lsp.server import LanguageServer

logger = logging.getLogger(__name__)

AUTH_TOKEN_OPTION = "authToken"
# Editors send `initialize` as soon as they connect; a connection that has not authenticated by then is dropped.
AUTHENTICATION_TIMEOUT_S = 30.0
# An `initialize` from VS Code or Neovim is about 10 kB; nothing larger is read from an unauthenticated client.
MAX_UNAUTHENTICATED_MESSAGE_BYTES = 1 << 20
SERVER_NOT_INITIALIZED = types.ErrorCodes.ServerNotInitialized.value
REQUEST_FAILED = types.LSPErrorCodes.RequestFailed.value

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


class ListenRefused(ValueError):
    """A place the server will not listen on; the message says why and what to do."""


def tcp_listen_addresses(host: str, allow_non_loopback: bool) -> list[str]:
    """The IP addresses `host` names, every one loopback unless `allow_non_loopback`.

    The server binds these addresses, not the name, so what was checked is what is bound."""
    name = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        found = socket.getaddrinfo(name, None, type=socket.SOCK_STREAM)
    except socket.gaierror as failure:
        raise ListenRefused(f"cannot resolve --tcp host {host!r}: {failure.strerror}; use 127.0.0.1") from failure
    addresses = list(dict.fromkeys(str(entry[4][0]) for entry in found))
    reachable = [address for address in addresses if not ipaddress.ip_address(address.partition("%")[0]).is_loopback]
    if reachable and not allow_non_loopback:
        named = host if reachable == [name] else f"{host} ({', '.join(reachable)})"
        raise ListenRefused(
            f"refusing --tcp on {named}: other machines can reach that address, and whoever connects with the "
            "token runs code as you (the token travels unencrypted). Listen on 127.0.0.1, or on --socket PATH "
            "(ssh -L forwards either from another machine), or add --allow-non-loopback on a network you trust"
        )
    return addresses


class BoundUnixSocket(NamedTuple):
    listening: socket.socket
    path: Path
    inode: int  # of the file bind made, so that only that file is removed at the end

    def remove_file(self) -> None:
        """Remove the socket file this server made, unless something else has replaced it since."""
        try:
            if os.lstat(self.path).st_ino == self.inode:
                os.unlink(self.path)
        except FileNotFoundError:
            pass  # Python 3.13's asyncio removes it when the server closes


def bind_unix_socket(path: Path) -> BoundUnixSocket:
    """A Unix socket bound at `path` with mode 0600 (only its owner can connect), replacing only a stale socket."""
    _remove_stale_socket(path)
    listening = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    # The umask applies at bind, so the socket is never connectable by others, not even until a chmod.
    previous_umask = os.umask(0o177)
    try:
        listening.bind(str(path))
    except OSError as failure:
        listening.close()
        raise ListenRefused(f"cannot listen on {path}: {failure.strerror or failure}") from failure
    finally:
        os.umask(previous_umask)
    return BoundUnixSocket(listening, path, os.lstat(path).st_ino)


def _remove_stale_socket(path: Path) -> None:
    try:
        status = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(status.st_mode):
        raise ListenRefused(f"{path} exists and is not a socket; choose another --socket path (it is left as it is)")
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        try:
            probe.connect(str(path))
        except ConnectionRefusedError:
            os.unlink(path)  # left behind by a server that did not clean up: nothing listens there
            return
        except OSError as failure:
            raise ListenRefused(
                f"cannot tell whether a server listens on {path} ({failure.strerror}); choose another --socket path"
            ) from failure
    raise ListenRefused(f"another server listens on {path}; stop it, or choose another --socket path")


class UnreadableMessage(ValueError):
    """What an unauthenticated client sent is not an LSP message this gate will read."""


async def read_message(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """One LSP base-protocol message (headers, blank line, JSON body); None at the end of the stream."""
    content_length = None
    while True:
        line = await reader.readline()
        if not line:
            return None
        if not line.strip():
            break
        name, _, value = line.decode("ascii", "replace").partition(":")
        if name.strip().lower() == "content-length":
            if not value.strip().isdigit():
                raise UnreadableMessage(f"a Content-Length of {value.strip()!r}")
            content_length = int(value)
    if content_length is None:
        raise UnreadableMessage("a message without Content-Length")
    if content_length > MAX_UNAUTHENTICATED_MESSAGE_BYTES:
        raise UnreadableMessage(f"a message of {content_length} bytes before authenticating")
    try:
        message = json.loads(await reader.readexactly(content_length))
    except json.JSONDecodeError as failure:
        raise UnreadableMessage("a body that is not JSON") from failure
    if not isinstance(message, dict):
        raise UnreadableMessage("a body that is not a JSON object")
    return message


def write_error(writer: asyncio.StreamWriter, request_id: Any, code: int, message: str, data: Any = None) -> None:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode("utf-8")
    writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)


class TokenGate:
    """Admits to the language server the first connection whose `initialize` carries the token, and nothing else.

    Before that, requests are answered with ServerNotInitialized and notifications dropped (as the LSP asks of a
    server before `initialize`); a wrong or missing token is answered with an error and the connection closed.
    The server serves that one session, and stops when it ends, as over stdio."""

    def __init__(self, server: LanguageServer, token: str) -> None:
        self.server = server
        self._token = token.encode("utf-8")
        self._session_started = False
        self.session_ended = asyncio.Event()
        self._stop_event = threading.Event()

    async def handle_connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        peer = writer.get_extra_info("peername") or "a Unix socket client"
        try:
            try:
                initialize = await asyncio.wait_for(self._authenticate(reader, writer, peer), AUTHENTICATION_TIMEOUT_S)
            except asyncio.TimeoutError:
                logger.warning(
                    "closed a connection from %s: no initialize with the token within %.0f s",
                    peer,
                    AUTHENTICATION_TIMEOUT_S,
                )
                return
            # ValueError: an UnreadableMessage, or a header line longer than the reader's limit
            except (ValueError, ConnectionError, asyncio.IncompleteReadError) as problem:
                logger.warning("closed a connection from %s before it authenticated: %s", peer, problem)
                return
            if initialize is None:
                return
            if self._session_started:
                already_serving = (
                    "drtriton-lsp already serves an editor on this socket; start another drtriton-lsp "
                    "(another --socket path or port) for this one"
                )
                write_error(writer, initialize["id"], REQUEST_FAILED, already_serving, {"retry": False})
                return
            self._session_started = True
            logger.info("serving the client at %s", peer)
            await self._serve_session(initialize, reader, writer)
        finally:
            writer.close()

    async def _authenticate(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, peer: object
    ) -> dict[str, Any] | None:
        """Reads up to `initialize`: the message with the token taken out when the token matches; None when the
        token is wrong or missing (the client is told why) or the client leaves first."""
        while True:
            message = await read_message(reader)
            if message is None:
                return None
            method = message.get("method")
            if "id" not in message or not isinstance(method, str):
                if method == "exit":
                    return None
                continue  # a notification or a response: nothing acts on it before initialize
            if method != types.INITIALIZE:
                not_yet = (
                    f"drtriton-lsp: {method} before initialize; send initialize "
                    f"(with initializationOptions.{AUTH_TOKEN_OPTION}) first"
                )
                write_error(writer, message["id"], SERVER_NOT_INITIALIZED, not_yet)
                await writer.drain()
                continue
            problem = self._token_problem(message)
            if problem is None:
                return message
            logger.warning("refused a connection from %s: %s", peer, problem)
            refusal = f"drtriton-lsp refused the connection: {problem}"
            write_error(writer, message["id"], REQUEST_FAILED, refusal, {"retry": False})
            await writer.drain()
            return None

    def _token_problem(self, initialize: dict[str, Any]) -> str | None:
        """What is wrong with the token in `initialize`, or None when it matches (then it is removed from the
        message, so neither pygls's log nor the server's settings ever see it)."""
        params = initialize.get("params")
        options = params.get("initializationOptions") if isinstance(params, dict) else None
        sent = options.get(AUTH_TOKEN_OPTION) if isinstance(options, dict) else None
        if not isinstance(sent, str):
            return (
                f"initialize must carry initializationOptions.{AUTH_TOKEN_OPTION}: the token the server printed, "
                "or the content of its --token-file (VS Code: set drtriton.server.tokenFile; Neovim: token_file "
                "in require('drtriton').socket_config)"
            )
        if not hmac.compare_digest(sent.encode("utf-8"), self._token):
            return (
                f"initializationOptions.{AUTH_TOKEN_OPTION} is not this server's token; point the editor at the "
                "file the server reads (its --token-file)"
            )
        del options[AUTH_TOKEN_OPTION]
        return None

    async def _serve_session(
        self, initialize: dict[str, Any], reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        protocol = self.server.protocol
        protocol.set_writer(writer)  # type: ignore[arg-type]  # pygls writes to a StreamWriter as start_tcp does
        try:
            protocol.handle_message(protocol.structure_message(initialize))
        except Exception as failure:  # as pygls's own read loop treats a message it cannot handle
            logger.exception("initialize could not be handled")
            self.server.report_server_error(failure, JsonRpcException)
        try:
            await run_async(
                stop_event=self._stop_event,
                reader=reader,
                protocol=protocol,
                logger=logger,
                error_handler=self.server.report_server_error,
            )
        except Exception:  # a connection reset mid-message: the session is over all the same
            logger.exception("the client's connection failed")
        # Only here, not on `exit`: pygls's exit handler ends the process itself (SystemExit passes through).
        self.server.shutdown()
        self.session_ended.set()


async def serve(
    server: LanguageServer,
    token: str,
    start_listening: Callable[[Handler], Awaitable[asyncio.Server]],
    announce: Callable[[str], None],
) -> None:
    """Listen (through `start_listening`) until the admitted client's session ends."""
    gate = TokenGate(server, token)
    try:
        listener = await start_listening(gate.handle_connection)
    except OSError as failure:
        raise ListenRefused(f"cannot listen: {failure.strerror or failure}") from failure
    for listening in listener.sockets:
        address = listening.getsockname()
        if listening.family == socket.AF_UNIX:
            announce(f"listening on {address}")
        else:
            announce(f"listening on {address[0]} port {address[1]}")
    async with listener:
        await gate.session_ended.wait()

