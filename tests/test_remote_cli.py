"""`drtriton optimize --remote` and `drtriton verify --remote` end to end through a real sshd (tests/ssh_server.py):
the report is the local run's, plus the host it ran on; the remote judge passes and rejects as the local one does; a
remote that cannot be used exits 2 saying what to check.

Each test runs the real command in a subprocess; the remote workers run on this machine, through ssh.
"""

from __future__ import annotations

import json
import platform
import re
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from tests.conftest import FIXTURES
from tests.test_cli import drtriton

pytestmark = pytest.mark.slow

# What differs between two runs of the same job: when it ran and how long it (or a step it skipped) took.
RUN_SPECIFIC = ("created",)
SEARCH_RUN_SPECIFIC = ("seconds", "stages_s", "first_verified_s")
CORRECTNESS_RUN_SPECIFIC = ("seconds",)  # the verification's wall seconds per phase
SECONDS = re.compile(r"about \d+ s")


def comparable(report: dict[str, Any]) -> dict[str, Any]:
    search = {key: value for key, value in report["search"].items() if key not in SEARCH_RUN_SPECIFIC}
    checks = {key: SECONDS.sub("about N s", str(value)) for key, value in report["correctness"]["checks"].items()}
    correctness = {key: value for key, value in report["correctness"].items() if key not in CORRECTNESS_RUN_SPECIFIC}
    return {
        **{key: value for key, value in report.items() if key not in RUN_SPECIFIC},
        "search": search,
        "correctness": {**correctness, "checks": checks},
    }


def test_optimize_on_a_remote_host_gives_the_local_report_plus_the_host(remote_ssh, example_copy, tmp_path):
    path = example_copy("scaled_activation_chain.py")
    common = ["optimize", str(path), "--device", "cpu", "--trials", "2"]
    with ThreadPoolExecutor(max_workers=2) as both:  # side by side: the test takes one run's time, not two
        remote_run = both.submit(drtriton, *common, "--remote", remote_ssh.address, "--remote-python",
                                 remote_ssh.remote_python, "--json", str(tmp_path / "remote.json"))
        local_run = both.submit(drtriton, *common, "--json", str(tmp_path / "local.json"))
        remote, local = remote_run.result(), local_run.result()
    assert remote.returncode == 0, remote.stderr
    assert local.returncode == 0, local.stderr

    remote_report = json.loads((tmp_path / "remote.json").read_text())
    local_report = json.loads((tmp_path / "local.json").read_text())
    assert remote_report["status"] == "verified"
    assert remote_report["device"] == {**local_report["device"], "host": platform.node()}
    assert comparable({**remote_report, "device": local_report["device"]}) == comparable(local_report)
    assert f"on {platform.node()}" in remote.stderr  # the printed report names the host


def test_verify_on_a_remote_host_passes_a_good_candidate_and_rejects_a_bad_one(remote_ssh, tmp_path):
    task = str(FIXTURES / "verify" / "task_scale_relu.py")
    remote = ["--remote", remote_ssh.address, "--remote-python", remote_ssh.remote_python, "--trials", "2"]
    with ThreadPoolExecutor(max_workers=2) as both:
        good_run = both.submit(
            drtriton, "verify", task, str(FIXTURES / "verify" / "good.py"), *remote, "--json", str(tmp_path / "r.json")
        )
        bad_run = both.submit(drtriton, "verify", task, str(FIXTURES / "verify" / "wrong_result.py"), *remote)
        good, bad = good_run.result(), bad_run.result()
    assert good.returncode == 0, good.stderr
    report = json.loads((tmp_path / "r.json").read_text())
    assert report["status"] == "verified" and report["device"]["host"] == platform.node()
    assert bad.returncode == 1 and "differ from the reference" in bad.stderr


def test_a_remote_that_cannot_be_reached_or_is_malformed_exits_2_saying_what_to_check(remote_ssh, example_copy):
    path = example_copy("scaled_activation_chain.py")
    unreachable = drtriton("optimize", str(path), "--device", "cpu", "--remote", f"{remote_ssh.address}:1")
    said = " ".join(unreachable.stderr.split())  # as printed, wrapped to the terminal's width
    assert unreachable.returncode == 2, unreachable.stderr
    assert f"error: the capture worker failed: the ssh connection to {remote_ssh.address}:1 failed" in said
    assert "what to do: check that `ssh -p 1 drtriton-test-gpu true` works" in said

    malformed = drtriton("optimize", str(path), "--remote", "gpu-box")
    assert malformed.returncode == 2
    assert "'gpu-box' does not start with ssh://; write it as ssh://[user@]host[:port]" in malformed.stderr

    side_by_side = drtriton("bench", str(path.parent), "--remote", remote_ssh.address, "--jobs", "2")
    assert side_by_side.returncode == 2 and "run with --jobs 1" in " ".join(side_by_side.stderr.split())
