"""Reading and writing the user's source file as they keep it: every byte, line ending and byte order mark.

A write replaces the file only if it still holds the bytes drtriton read, and never loses an edit saved
meanwhile: it checks just before an atomic rename, checks again after it, and puts the user's file back
on a conflict.
"""

from __future__ import annotations

import os
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from drtriton_lsp.errors import DrtritonError

BYTE_ORDER_MARK = b"\xef\xbb\xbf"
# How long a write opened before the rename may take to land and still be noticed (an editor's save: microseconds).
LATE_WRITE_GRACE_S = 0.05


@dataclass(frozen=True)
class SourceFile:
    """A file as read: `raw` its bytes, `text` decoded with line endings kept and without the byte order
    mark (`has_bom` says whether it had one; write_back's text goes back with it)."""

    path: Path
    raw: bytes
    text: str
    has_bom: bool

    def encoded(self, text: str) -> bytes:
        """`text` as this file's bytes: UTF-8, with the byte order mark if the file had one."""
        return (BYTE_ORDER_MARK if self.has_bom else b"") + text.encode("utf-8")


def read_source_file(path: Path) -> SourceFile:
    """The file's bytes and text; a DrtritonError for a missing file or one that is not UTF-8."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DrtritonError(f"{path} does not exist", "check the path") from None
    except IsADirectoryError:
        raise DrtritonError(f"{path} is a folder, not a file", "name a Python file") from None
    has_bom = raw.startswith(BYTE_ORDER_MARK)
    try:
        text = raw[len(BYTE_ORDER_MARK) if has_bom else 0 :].decode("utf-8")
    except UnicodeDecodeError as error:
        raise DrtritonError(
            f"{path} is not UTF-8 text (byte {error.start} cannot be decoded)",
            "drtriton reads Python source files saved as UTF-8; save it as UTF-8 and run again",
        ) from None
    return SourceFile(path, raw, text, has_bom)


def replace_if_unchanged(path: Path, expected: bytes, new: bytes) -> None:
    """Replace `path`'s content by `new` if it still holds `expected`; otherwise raise and leave it as it is.

    The new bytes go to a temporary file beside it first. A second name (a hard link) keeps the file's
    current content reachable while the rename puts the new one in place; after the rename that content
    is checked again, so an edit that landed between the first check and the rename (or through a file
    handle opened before it, within LATE_WRITE_GRACE_S) is noticed and the user's file is put back. An
    edit saved after the rename goes to the new file and stays.
    """
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".drtriton.tmp")
    keep = f"{temporary}.original"
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(new)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, path.stat().st_mode & 0o7777)
        if path.read_bytes() != expected:
            raise _changed(path)
        try:
            os.link(path, keep)
        except OSError:  # a file system without hard links: the check just above is the last one
            os.replace(temporary, path)
            return
        os.replace(temporary, path)
        # NOTE: an editor that opened the file just before the rename writes its save into the old content
        # (now reachable only through `keep`) a moment later; waiting this long before the last check sees it.
        time.sleep(LATE_WRITE_GRACE_S)
        if Path(keep).read_bytes() != expected:
            _put_back(path, keep, new)
            raise _changed(path)
    finally:
        for leftover in (temporary, keep):
            if os.path.exists(leftover):
                os.unlink(leftover)


def _put_back(path: Path, keep: str, written: bytes) -> None:
    """Undo the rename: the user's version returns to `path`, unless `path` was edited too since the rename."""
    if path.read_bytes() == written:
        os.replace(keep, path)
        return
    saved = path.with_name(f"{path.name}.drtriton-conflict")
    os.replace(keep, saved)
    raise DrtritonError(
        f"{path} was edited by another program while drtriton wrote it; your earlier edit is in {saved}",
        f"compare {path} with {saved}, keep what you need, then run drtriton optimize again",
        path=str(path),
    )


def _changed(path: Path) -> DrtritonError:
    return DrtritonError(
        f"{path} changed while drtriton was working; nothing was written",
        "run drtriton optimize again on the current file",
        path=str(path),
    )
