"""The `drtriton-lsp` entry point: serves the language server over stdio (default), a Unix socket or loopback TCP.

Logs go to stderr (editors show them in the server's log); stdout carries only LSP messages.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Awaitable

from drtriton_lsp import __version__

if TYPE_CHECKING:
    from drtriton_lsp.server.language_server import DrtritonLanguageServer


def announce(line: str) -> None:
    """A line for whoever started a socket server (its terminal), whatever the log level."""
    print(f"drtriton-lsp: {line}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argument_parser()
    arguments = parser.parse_args(argv)
    logging.basicConfig(level=arguments.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if arguments.token_file and not (arguments.socket or arguments.tcp):
        parser.error("--token-file applies to --socket and --tcp; stdio needs no token (the editor owns both ends)")
    if arguments.allow_non_loopback and not arguments.tcp:
        parser.error("--allow-non-loopback applies to --tcp only")
    host, _, port = (arguments.tcp or "").rpartition(":")
    if arguments.tcp and (not host or not port.isdigit() or int(port) > 65535):
        parser.error(f"--tcp wants HOST:PORT, e.g. 127.0.0.1:2087, not {arguments.tcp!r}")
    if not (arguments.socket or arguments.tcp):
        build_frozen_server().start_io()
        return 0
    return serve_on_socket(parser, arguments, host, int(port or 0))


def argument_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="drtriton-lsp", description="drtriton's language server (stdio by default)")
    transport = parser.add_mutually_exclusive_group()
    transport.add_argument(
        "--socket",
        metavar="PATH",
        type=Path,
        help="listen on a Unix socket created with mode 0600 instead of stdio (the recommended socket); "
        "clients must send the token",
    )
    transport.add_argument(
        "--tcp",
        metavar="HOST:PORT",
        help="listen on TCP on a loopback address instead of stdio; clients must send the token",
    )
    parser.add_argument(
        "--token-file",
        metavar="PATH",
        type=Path,
        help="with --socket or --tcp: the token clients send as initializationOptions.authToken, read from PATH "
        "(yours, mode 0600), or written there when PATH does not exist; without it a new token is printed",
    )
    parser.add_argument(
        "--allow-non-loopback",
        action="store_true",
        help="let --tcp listen on an address other machines can reach (the token is still required, and travels "
        "unencrypted)",
    )
    parser.add_argument(
        "--log-level",
        default="WARNING",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="what the server logs on stderr, which editors show as its log (default WARNING)",
    )
    parser.add_argument("--version", action="version", version=f"drtriton-lsp {__version__}")
    return parser


def serve_on_socket(parser: argparse.ArgumentParser, arguments: argparse.Namespace, host: str, port: int) -> int:
    """Serve one session on --socket or --tcp, to the client that sends the token; 1 if the port is taken."""
    from drtriton_lsp.server import auth_token, socket_transport

    server = build_frozen_server()
    bound_socket = None
    try:
        if arguments.token_file:
            token, token_line = auth_token.token_from_file(arguments.token_file)
        else:
            token = auth_token.new_token()
            token_line = f"clients must send initializationOptions.authToken = {token}"
        if arguments.tcp:
            addresses = socket_transport.tcp_listen_addresses(host, arguments.allow_non_loopback)
        else:
            # Last: from here on, the `finally` below removes the socket file whatever happens.
            bound_socket = socket_transport.bind_unix_socket(arguments.socket)
    except (socket_transport.ListenRefused, auth_token.TokenFileProblem) as problem:
        parser.error(str(problem))

    def start_listening(handler: socket_transport.Handler) -> Awaitable[asyncio.Server]:
        if bound_socket is not None:
            return asyncio.start_unix_server(handler, sock=bound_socket.listening)
        return asyncio.start_server(handler, host=addresses, port=port)

    try:
        announce(token_line)
        asyncio.run(socket_transport.serve(server, token, start_listening, announce))
    except socket_transport.ListenRefused as problem:
        announce(f"{arguments.tcp or arguments.socket}: {problem}")
        return 1
    finally:
        if bound_socket is not None:
            bound_socket.remove_file()
    return 0


def build_frozen_server() -> DrtritonLanguageServer:
    from drtriton_lsp.server.language_server import build_server

    server = build_server()
    # NOTE: lsprotocol and pygls leave a heap so large that one full garbage collection takes about 120 ms,
    # a pause any request could hit. Frozen, the objects made while importing are never traversed again.
    gc.freeze()
    return server


if __name__ == "__main__":
    raise SystemExit(main())
