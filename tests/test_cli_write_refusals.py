"""`drtriton optimize --write` refuses to write when it must, as the user sees it: the exit code, the message, and
the file left exactly as the user keeps it.

- a kernel that fails verification is reported as failed (exit 1) and never written;
- an edit saved while drtriton works is kept: nothing is written (exit 2), and the message says to run again.
Each test runs the real command in a subprocess (workers and all).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

pytestmark = pytest.mark.slow

# a forward whose generated kernel fails verification (see the file's docstring)
COUNTING = (Path(__file__).parent / "fixtures" / "refusals" / "counting.py").read_text()


def test_a_kernel_that_fails_verification_is_reported_failed_and_not_written(tmp_path):
    path = tmp_path / "counting.py"
    path.write_text(COUNTING)
    report_path = tmp_path / "report.json"
    finished = subprocess.run(
        [sys.executable, "-m", "drtriton_lsp.cli", "optimize", str(path), "--device", "cpu", "--trials", "2",
         "--write", "--json", str(report_path)],
        capture_output=True, text=True, timeout=600,
    )
    assert finished.returncode == 1, finished.stderr
    report = json.loads(report_path.read_text())
    assert report["status"] == "failed" and report["correctness"]["reason"]
    assert report["kernel"]["source"]  # a kernel was generated
    assert "not written: Counting was not verified" in finished.stderr
    assert path.read_text() == COUNTING


def test_an_edit_saved_while_drtriton_works_is_kept_and_nothing_is_written(example_copy, kill_at_end):
    path = example_copy("scaled_activation_chain.py")
    original = path.read_bytes()
    process = subprocess.Popen(
        [sys.executable, "-m", "drtriton_lsp.cli", "optimize", str(path), "--device", "cpu", "--trials", "1",
         "--write"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True,
    )
    kill_at_end.add(psutil.Process(process.pid))
    deadline = time.monotonic() + 60
    while not psutil.Process(process.pid).children(recursive=True) and time.monotonic() < deadline:
        time.sleep(0.2)  # a worker is capturing the graph: drtriton has read the file and is working
    assert psutil.Process(process.pid).children(recursive=True), "no worker process was started"
    edited = original + b"\n# the user's edit, saved while drtriton works\n"
    path.write_bytes(edited)
    _, stderr = process.communicate(timeout=600)
    assert process.returncode == 2, stderr
    assert "changed while drtriton was working; nothing was written" in " ".join(stderr.split())
    assert path.read_bytes() == edited
    assert "verified" in stderr  # the kernel was good: only the edit stopped the write
