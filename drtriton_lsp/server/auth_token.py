"""The token a client must send to use the server over a socket: made fresh, or kept in a file only its owner can read.

Whoever holds it can run code as the server's user (jobs run the document's code), so a token file must be private.
"""

from __future__ import annotations

import os
import secrets
import stat
from pathlib import Path

MINIMUM_TOKEN_CHARACTERS = 32
TOKEN_FILE_MAX_BYTES = 4096


class TokenFileProblem(ValueError):
    """A token file that cannot be used; the message says why and what to do."""


def new_token() -> str:
    """256 random bits, URL-safe (43 characters): pasted into a file or a setting without quoting."""
    return secrets.token_urlsafe(32)


def token_from_file(path: Path) -> tuple[str, str]:
    """The token in `path`, or a new one written there (mode 0600) when nothing is at `path`; plus a line for the
    server's log that says which, without the token."""
    try:
        # O_EXCL: never follows a link or writes into a file someone else put there first.
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return _read_private_token(path), f"clients must send the token in {path}"
    except OSError as failure:
        raise TokenFileProblem(f"cannot create the token file {path}: {failure.strerror}") from failure
    token = new_token()
    with os.fdopen(descriptor, "w", encoding="ascii") as file:
        file.write(token + "\n")
    return token, f"wrote a new token to {path} (mode 0600); clients must send it"


def _read_private_token(path: Path) -> str:
    try:
        descriptor = os.open(path, os.O_RDONLY)
    except OSError as failure:
        raise TokenFileProblem(f"cannot read the token file {path}: {failure.strerror}") from failure
    with os.fdopen(descriptor, "rb") as file:
        # Checked on the opened file, so a file swapped in after a check cannot slip through.
        status = os.fstat(file.fileno())
        if not stat.S_ISREG(status.st_mode):
            raise TokenFileProblem(f"the token file {path} is not a regular file; give --token-file a file path")
        if status.st_uid != os.getuid():
            raise TokenFileProblem(
                f"the token file {path} belongs to another user (uid {status.st_uid}), who could read or change it; "
                "use a file of your own"
            )
        loose = stat.S_IMODE(status.st_mode) & 0o077
        if loose:
            raise TokenFileProblem(
                f"the token file {path} can be read or written by group or others (mode "
                f"{stat.S_IMODE(status.st_mode):04o}), and whoever reads it can run code as you through this server; "
                f"run `chmod 600 {path}` and start the server again"
            )
        content = file.read(TOKEN_FILE_MAX_BYTES + 1)
    if len(content) > TOKEN_FILE_MAX_BYTES:
        raise TokenFileProblem(f"the token file {path} holds over {TOKEN_FILE_MAX_BYTES} bytes; it must hold one token")
    try:
        token = content.decode("utf-8").strip()
    except UnicodeDecodeError as failure:
        raise TokenFileProblem(f"the token file {path} is not UTF-8 text") from failure
    if len(token) < MINIMUM_TOKEN_CHARACTERS:
        raise TokenFileProblem(
            f"the token in {path} has {len(token)} characters, too few to resist guessing; use at least "
            f"{MINIMUM_TOKEN_CHARACTERS} (remove the file and the server writes a new one there)"
        )
    return token
