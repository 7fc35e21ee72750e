"""Malformed messages are answered, never shown: a request whose params do not fit the LSP schema gets JSON-RPC's
-32602 (Invalid params) naming what was wrong, and errors outside any request go to the editor's log, not a popup.

pygls would drop such a request unanswered (the editor waits forever) and pop "Error in server: ..." each time.
"""

from __future__ import annotations

import logging
from typing import Any

from cattrs import ClassValidationError, transform_error
from cattrs.v import format_exception
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol

logger = logging.getLogger(__name__)
INVALID_PARAMS_DETAILS = 3  # the first few problems cattrs names, enough to find the field


class _Dropped:
    """What `structure_message` returns for a message it answered or logged: `handle_message` skips it."""


DROPPED = _Dropped()


class AnsweringProtocol(LanguageServerProtocol):
    """pygls's protocol, answering a request it cannot read instead of leaving it unanswered."""

    def structure_message(self, data: dict[str, Any]):
        try:
            return super().structure_message(data)
        except JsonRpcException as error:
            method = data.get("method")
            problem = _problem(error)
            if "id" in data and isinstance(method, str):
                message = f"invalid params for {method}: {problem}"
                self._send_response(data["id"], error=JsonRpcInvalidParams(message).to_response_error())
            else:
                message = f"ignored a malformed {'notification ' + method if method else 'message'}: {problem}"
            logger.warning("%s", message)
            self._server.window_log_message(types.LogMessageParams(types.MessageType.Warning, f"drtriton: {message}"))
            return DROPPED

    def handle_message(self, message) -> None:
        if message is not DROPPED:
            super().handle_message(message)


def _problem(error: JsonRpcException) -> str:
    """cattrs's own account of what did not fit (`invalid value for type, expected int @ $.params.position.line`)."""
    cause = error.__cause__
    if isinstance(cause, ClassValidationError):
        lines = transform_error(cause, path="$", format_exception=_described)
        return "; ".join(lines[:INVALID_PARAMS_DETAILS])
    return type(cause).__name__ if cause is not None else str(error)


def _described(exception: BaseException, expected: type | None) -> str:
    """cattrs's wording, plus the validator's own sentence for an out-of-range value (`Position.line should be ...`)."""
    if type(exception) is ValueError and str(exception):
        return f"invalid value ({exception})"
    return format_exception(exception, expected)


def log_out_of_band_error(server, error: Exception) -> None:
    """An error no request is waiting for (a notification's handler, a message that failed to send): logged in the
    editor's output, with what to do, never shown as a popup of our internals."""
    logger.error("drtriton-lsp: %s: %s", type(error).__name__, error, exc_info=error)
    server.window_log_message(
        types.LogMessageParams(
            types.MessageType.Error,
            f"drtriton: an editor notification could not be handled ({type(error).__name__}: {error}); "
            "the server goes on. If something looks stale, close and reopen the file.",
        )
    )
