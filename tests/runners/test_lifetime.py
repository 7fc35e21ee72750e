"""A child tied to its starter (runners.lifetime) ends with everything it started once the starter is gone,
however the starter ends and whatever the child's main thread is doing; it does not end while the starter lives,
even when the thread that started it has ended.

Each test runs a starter program that starts a child, which starts a grandchild of its own and then hangs the
way a candidate can: in a native call that holds the GIL (no Python thread runs: only the kernel's parent-death
signal can end it), or in a pure-Python loop. The programs are plain Python: no torch, no worker.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import psutil
import pytest

from drtriton_lsp.runners import lifetime
from tests.process_trees import alive, alive_after, below

pytestmark = pytest.mark.slow

CHILD_MARK = "drtriton-test-tied-child"
GRANDCHILD_MARK = "drtriton-test-grandchild"
GUARD_MODULE = "drtriton_lsp.runners.lifetime"

# argv[1], how the child hangs: "native", in libc's sleep called with the GIL held (ctypes.PyDLL keeps it);
# "python-loop", in a loop of bytecode with the kernel's signal left unarmed, so that the watchdog thread must end
# it; "early", in a loop of bytecode with no watchdog, so that only the check made when it is tied can end it.
CHILD = f"""
import ctypes, subprocess, sys
from drtriton_lsp.runners import lifetime
if sys.argv[1] == "python-loop":
    lifetime._arm_parent_death_signal = lambda: None
if sys.argv[1] == "early":
    lifetime._watch_parent = lambda parent: None
lifetime.end_with_parent()
subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)", "{GRANDCHILD_MARK}"])
print("tied", flush=True)
if sys.argv[1] == "native":
    ctypes.PyDLL(None).sleep(600)
while True:
    pass
"""

# argv[1]: passed to the child. argv[2]: "thread" starts the child from a thread that waits until the child is
# tied (the kernel then knows that thread as its parent) and ends; "main" from the main thread.
STARTER = f"""
import os, subprocess, sys, threading, time
from drtriton_lsp.runners import lifetime

def start():
    child = lifetime.start_child(
        [sys.executable, "-c", {CHILD!r}, sys.argv[1], "{CHILD_MARK}"], env=dict(os.environ), stdout=subprocess.PIPE
    )
    assert child.stdout.readline() == b"tied\\n"

if sys.argv[2] == "thread":
    starting = threading.Thread(target=start)
    starting.start()
    starting.join()
else:
    start()
print("started", flush=True)
time.sleep(600)
"""


def start_starter(child_mode: str, start_from: str, kill_at_end: set[psutil.Process]) -> subprocess.Popen:
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, child_mode, start_from], stdout=subprocess.PIPE, text=True
    )
    kill_at_end.add(psutil.Process(starter.pid))
    return starter


def role(arguments: list[str]) -> str | None:
    """Which process of the tree these are the arguments of. (The child's program text holds the grandchild's
    mark, and the starter's both: only the last argument tells.)"""
    if arguments[1:3] == ["-m", GUARD_MODULE]:
        return "guard"
    return {CHILD_MARK: "child", GRANDCHILD_MARK: "grandchild"}.get(arguments[-1]) if arguments else None


def wait_for_tree(starter: subprocess.Popen, kill_at_end: set[psutil.Process]) -> dict[str, psutil.Process]:
    """The child, its group guard and its grandchild, once the starter says the child is tied."""
    assert starter.stdout.readline() == "started\n"
    deadline = time.monotonic() + 20
    found: dict[str, psutil.Process] = {}
    while len(found) < 3 and time.monotonic() < deadline:
        for process in below(starter.pid):
            kill_at_end.add(process)
            try:
                name = role(process.cmdline())
            except psutil.Error:
                continue
            if name is not None:
                found[name] = process
        time.sleep(0.1)
    assert len(found) == 3, f"the child's tree did not start in 20 s (found {sorted(found)})"
    return found


@pytest.mark.parametrize("child_mode", ["native", "python-loop"])
def test_a_child_and_what_it_started_end_within_seconds_when_its_starter_is_killed(child_mode, kill_at_end):
    starter = start_starter(child_mode, "main", kill_at_end)
    tree = wait_for_tree(starter, kill_at_end)
    starter.kill()
    starter.wait()
    assert alive_after(list(tree.values()), 5) == []


def test_a_child_started_from_a_thread_that_ended_lives_until_its_starter_ends(kill_at_end):
    starter = start_starter("native", "thread", kill_at_end)
    tree = wait_for_tree(starter, kill_at_end)  # the thread that started the child has ended
    time.sleep(1)
    assert alive(list(tree.values())) == list(tree.values())
    starter.kill()
    assert alive_after(list(tree.values()), 5) == []


def test_when_a_child_is_killed_its_guard_ends_what_it_started(kill_at_end):
    starter = start_starter("native", "main", kill_at_end)
    tree = wait_for_tree(starter, kill_at_end)
    tree["child"].kill()  # the out-of-memory killer, say: the child cannot end its group itself
    assert alive_after([tree["guard"], tree["grandchild"]], 5) == []
    assert starter.poll() is None


def test_a_child_whose_starter_died_before_it_was_tied_ends_at_once(kill_at_end):
    # The starter named in the environment is not the child's parent: it died, and the child was handed over.
    env = {**os.environ, lifetime.PARENT_PID_VARIABLE: str(os.getppid())}
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, "early", CHILD_MARK], env=env, stdout=subprocess.PIPE, text=True,
        start_new_session=True,
    )
    kill_at_end.add(psutil.Process(child.pid))
    output, _ = child.communicate(timeout=20)
    assert child.returncode == -signal.SIGKILL
    assert output == ""  # none of its own code ran: no grandchild either
