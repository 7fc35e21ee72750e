"""Process trees in tests: the processes below a pid, and which of them still run.

Used by the tests that kill a caller (the CLI, the language server, a starter) and look for what it left running.
"""

from __future__ import annotations

import time

import psutil


def below(pid: int) -> list[psutil.Process]:
    """Every descendant of `pid` (none if it has ended)."""
    try:
        return psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def alive(processes: list[psutil.Process]) -> list[psutil.Process]:
    """The processes that still run (a zombie has ended: it only waits to be reaped)."""
    living = []
    for process in processes:
        try:
            if process.status() != psutil.STATUS_ZOMBIE:
                living.append(process)
        except psutil.NoSuchProcess:
            continue
    return living


def alive_after(processes: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """The processes still running after `timeout_s`; an empty list as soon as all have ended."""
    deadline = time.monotonic() + timeout_s
    while alive(processes) and time.monotonic() < deadline:
        time.sleep(0.1)
    return alive(processes)
