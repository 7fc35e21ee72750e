"""Collision-free identifiers for generated code: one scope per generated function or module.

Graph value names become variable names; helper names (`mask`, `offsets`) must never shadow them.
"""

from __future__ import annotations

import keyword
import re

# Module names every generated block imports; nothing generated may shadow them.
IMPORTED_MODULE_NAMES = ("torch", "triton", "tl")


class NameScope:
    """Hands out unique identifiers: `fresh("mask")` gives "mask", then "mask_2", "mask_3", ..."""

    def __init__(self, reserved: tuple[str, ...] | list[str] = ()):
        self._taken: set[str] = set(IMPORTED_MODULE_NAMES) | set(reserved)

    def fresh(self, base: str) -> str:
        candidate = identifier_from(base)
        suffix = 2
        unique = candidate
        while unique in self._taken:
            unique = f"{candidate}_{suffix}"
            suffix += 1
        self._taken.add(unique)
        return unique

    @property
    def taken(self) -> frozenset[str]:
        return frozenset(self._taken)


def identifier_from(text: str) -> str:
    """A valid, non-keyword Python identifier that reads like `text` ("2*s77" -> "_2_s77")."""
    cleaned = re.sub(r"\W+", "_", text).strip("_") or "value"
    if cleaned[0].isdigit():
        cleaned = "_" + cleaned
    if keyword.iskeyword(cleaned):
        cleaned += "_"
    return cleaned
