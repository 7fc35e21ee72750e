"""The `drtriton-lsp` entry point: serves the language server over stdio (default) or TCP.

Logs go to stderr (editors show them in the server's log); stdout carries only LSP messages.
"""

from __future__ import annotations

import argparse
import gc
import logging

from drtriton_lsp import __version__


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="drtriton-lsp", description="drtriton's language server (stdio by default)")
    parser.add_argument("--tcp", metavar="HOST:PORT", help="listen on a TCP socket instead of stdio")
    parser.add_argument("--log-level", default="WARNING", choices=("DEBUG", "INFO", "WARNING", "ERROR"))
    parser.add_argument("--version", action="version", version=f"drtriton-lsp {__version__}")
    arguments = parser.parse_args(argv)
    logging.basicConfig(level=arguments.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s")

    host, _, port = (arguments.tcp or "").rpartition(":")
    if arguments.tcp and (not host or not port.isdigit()):
        parser.error(f"--tcp wants HOST:PORT, e.g. 127.0.0.1:2087, not {arguments.tcp!r}")

    from drtriton_lsp.server.language_server import build_server

    server = build_server()
    # NOTE: lsprotocol and pygls leave a heap so large that one full garbage collection takes about 120 ms,
    # a pause any request could hit. Frozen, the objects made while importing are never traversed again.
    gc.freeze()
    if arguments.tcp:
        server.start_tcp(host, int(port))
    else:
        server.start_io()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
