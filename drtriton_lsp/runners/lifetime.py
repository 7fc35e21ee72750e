"""Child processes that end with the process that started them, however it ends (an exit, a crash, SIGKILL).

Without this, a worker whose starter is killed lives on with parent 1, running a hanging candidate forever.

How a process kind adopts it (the local runner's worker does):
- The starter starts it with `start_child` instead of `subprocess.Popen`: the child gets its own session (so it
  and everything it starts form one process group), is started from a thread that lives as long as the starter,
  and finds the starter's pid in the environment variable DRTRITON_PARENT_PID.
- The child calls `end_with_parent()` first thing at start-up, in its main thread, before any user code.
A process started by other means (multiprocessing) is told its starter's pid otherwise: the language server's
analysis process calls `end_with_parent(pid)` as its pool's initializer. A process that a tied child starts in
the child's own group (the verification worker's candidate process, a plain `subprocess.Popen`) needs nothing:
the child's group guard ends it with the child. Only one started in a new session must adopt this itself.

What the child then does:
- On Linux it asks the kernel for SIGKILL when its parent dies (`PR_SET_PDEATHSIG`). That works even while the
  main thread is stuck in a native call that holds the GIL, where no Python thread can run. A parent that died
  before that (its pid is no longer the child's parent's) ends the child at once.
- A watchdog thread compares the parent pid with the expected one every PARENT_POLL_S seconds and kills the
  whole group once they differ: the mechanism where the kernel offers no parent-death signal (macOS) or
  refuses it. A pure-Python loop in the main thread still lets it run (the GIL switches between threads).
- A group guard (`python -m drtriton_lsp.runners.lifetime CHILD_PID`, in the child's group) kills the group
  once the child has ended: the kernel's SIGKILL ends the child alone, and processes the child started (a
  candidate's subprocesses) would outlive it.

The parent-death signal follows the *thread* that started the child, not the process: a child started from a
language server's job thread would be killed when that job ends, so `start_child` starts every child from one
thread kept for that (see _Starter).
"""

from __future__ import annotations

import ctypes
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from concurrent.futures import Future
from typing import Any

PARENT_PID_VARIABLE = "DRTRITON_PARENT_PID"
PARENT_POLL_S = 0.5
GUARD_POLL_S = 0.25
PR_SET_PDEATHSIG = 1  # from <linux/prctl.h>


def start_child(args: list[str], *, env: dict[str, str], **popen_options: Any) -> subprocess.Popen:
    """`subprocess.Popen(args, env=env, **popen_options)` in a new session, for a child that calls
    `end_with_parent()` at start-up: it is told this process's pid, and started from the starter thread."""
    return _STARTER.start(args, {**popen_options, "env": {**env, PARENT_PID_VARIABLE: str(os.getpid())}})


def end_with_parent(parent_pid: int | None = None) -> None:
    """Tie this process to the one that started it: when that one ends, this process and its process group
    are killed. The parent: `parent_pid` if given, else the pid in DRTRITON_PARENT_PID (set by `start_child`,
    and removed here so that processes this one starts by other means do not inherit it), else the current
    parent (started by hand). A process whose parent is init, or that has none (a container's first process),
    is tied to nothing."""
    inherited = os.environ.pop(PARENT_PID_VARIABLE, None)
    parent = parent_pid or int(inherited or os.getppid())
    if parent <= 1:
        return
    _arm_parent_death_signal()
    if os.getppid() != parent:  # the parent died before the signal was armed
        _end_process_tree()
    if os.getpgrp() == os.getpid():
        _start_group_guard()
    threading.Thread(target=_watch_parent, args=(parent,), name="drtriton-parent-watchdog", daemon=True).start()


def _arm_parent_death_signal() -> None:
    """Ask the Linux kernel to send SIGKILL when the parent ends. Elsewhere, or if refused, the watchdog remains."""
    if not sys.platform.startswith("linux"):
        return
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
    prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _watch_parent(parent: int) -> None:
    # An orphan is handed to init or a subreaper: its parent pid changes, and never changes back.
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    _end_process_tree()


def _end_process_tree() -> None:
    """Kill this process, with its whole process group when it leads one (never a group it merely joined,
    such as the shell's of a worker started by hand)."""
    if os.getpgrp() == os.getpid():
        os.killpg(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), signal.SIGKILL)


def _start_group_guard() -> None:
    """Start the guard of this process's group (see `guard_group`). It shares no pipe with this process: a
    reader of this process's output sees it end when this process ends."""
    subprocess.Popen(
        [sys.executable, "-m", "drtriton_lsp.runners.lifetime", str(os.getpid())],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def guard_group(leader: int) -> None:
    """The group guard's life: wait until `leader`, its parent and the leader of its group, has ended, then kill
    the group: whatever the leader left running in it, and the guard itself. However the leader ended (an exit,
    a crash, a kill), nothing it started in its group outlives it by more than GUARD_POLL_S."""
    while os.getppid() == leader:
        time.sleep(GUARD_POLL_S)
    os.killpg(os.getpgrp(), signal.SIGKILL)


class _Starter:
    """Starts child processes from one thread that lives as long as this process (a daemon thread ends only
    with the process). The kernel sends a child its parent-death signal when the thread that started it ends,
    so a child started from a short-lived thread (a job's) would die with that thread; started here, only with
    the process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._requests: queue.SimpleQueue[tuple[list[str], dict[str, Any], Future]] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def start(self, args: list[str], popen_options: dict[str, Any]) -> subprocess.Popen:
        started: Future[subprocess.Popen] = Future()
        with self._lock:
            # After a fork, the child process has no starter thread: it starts its own.
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="drtriton-process-starter", daemon=True)
                self._thread.start()
            self._requests.put((args, {**popen_options, "start_new_session": True}, started))
        return started.result()

    def _serve(self) -> None:
        while True:
            args, popen_options, started = self._requests.get()
            try:
                started.set_result(subprocess.Popen(args, **popen_options))
            except BaseException as error:  # noqa: BLE001 - raised again in the thread that asked
                started.set_exception(error)


_STARTER = _Starter()

if __name__ == "__main__":
    guard_group(int(sys.argv[1]))
