"""Errors a user can hit, each carrying what happened and what to do next.

Every layer raises `DrtritonError` (or a subclass) for bad input; anything else is a bug.
The CLI prints `message` and `hint`; the language server will show them as diagnostics.
"""

from __future__ import annotations


class DrtritonError(Exception):
    """A problem with the user's input or environment, explained.

    message: what happened, in one sentence.
    hint: what the user can do about it.
    path/line: where in the user's file, when known (1-based line).
    """

    def __init__(self, message: str, hint: str = "", *, path: str | None = None, line: int | None = None):
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.path = path
        self.line = line

    def located(self) -> str:
        """"path:line: message" when a location is known, else just the message."""
        if self.path and self.line:
            return f"{self.path}:{self.line}: {self.message}"
        if self.path:
            return f"{self.path}: {self.message}"
        return self.message

    def to_json(self) -> dict:
        return {"message": self.message, "hint": self.hint, "path": self.path, "line": self.line}


class SourceError(DrtritonError):
    """The user's file cannot be read as needed: syntax errors, unknown target, no example inputs."""


class CaptureError(DrtritonError):
    """`torch.export` could not turn the model into a graph (data-dependent control flow, ...)."""


class WorkerError(DrtritonError):
    """A worker process failed in a way that is not a verdict on a candidate."""
