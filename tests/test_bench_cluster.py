"""`drtriton bench --cluster` on a Ray cluster started by the test on this machine (CPU workers, the Triton
interpreter): problems run as Ray tasks and come back verified, and a task whose worker is killed runs again.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from drtriton_lsp.bench import suite
from drtriton_lsp.bench.cluster import RayPlaces
from drtriton_lsp.engine.pipeline import OptimizeOptions
from drtriton_lsp.runners.cluster import connected
from tests.test_bench import TINY_PROBLEM

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
ray = pytest.importorskip("ray", reason="needs the cluster extra (pip install 'drtriton-lsp[cluster]')")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.fixture
def ray_head():
    """A Ray head node with two CPUs on 127.0.0.1, as `ray start --head` starts one; yields its address (this machine
    joins it as a node would: Ray Client's ray:// addresses fail to connect now and then on a busy machine, see
    runners/cluster.py, and CI must not)."""
    ray_command = str(Path(sys.executable).with_name("ray"))
    port, client_port = free_port(), free_port()
    # Ray's sockets live under its temp folder, and a socket's path may not exceed 107 bytes: a short folder
    scratch = tempfile.TemporaryDirectory(prefix="ray-")
    environment = dict(os.environ)
    if not (Path.home() / ".ray" / "auth_token").exists():
        # Ray 2.60's head and clients authenticate with this user's token, which `ray start` does not write: on a
        # machine that never had one, the bench below failed to connect (AuthenticationError)
        generated = subprocess.run([ray_command, "get-auth-token", "--generate"], capture_output=True, text=True,
                                   timeout=120, env=environment)
        assert generated.returncode == 0, generated.stderr[-2000:]
    started = subprocess.run(
        [ray_command, "start", "--head", "--node-ip-address", "127.0.0.1", "--port", str(port),
         "--ray-client-server-port", str(client_port), "--num-cpus", "2", "--num-gpus", "0",
         "--include-dashboard", "false", "--disable-usage-stats", "--temp-dir", scratch.name],
        capture_output=True, text=True, timeout=120, env=environment,
    )
    assert started.returncode == 0, started.stderr[-2000:]
    try:
        yield f"127.0.0.1:{port}"
    finally:
        subprocess.run([ray_command, "stop", "--force"], capture_output=True, timeout=120, env=environment)
        scratch.cleanup()


def test_bench_on_a_ray_cluster_verifies_every_problem_and_says_where_each_ran(tmp_path, ray_head):
    problems = tmp_path / "problems"
    (problems / "nested").mkdir(parents=True)
    for name in ("a.py", "b.py", "nested/c.py"):
        (problems / name).write_text(TINY_PROBLEM)
    out = tmp_path / "out"
    # Ray 2.60 authenticates with a token by default: the caller says so with RAY_AUTH_MODE (its token is the one
    # `ray start` wrote for this user)
    finished = subprocess.run(
        [sys.executable, "-m", "drtriton_lsp.cli", "bench", str(problems), "--cluster", ray_head, "--out", str(out),
         "--trials", "2"],
        capture_output=True, text=True, timeout=600, env={**os.environ, "RAY_AUTH_MODE": "token"},
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert f"on the Ray cluster at {ray_head}" in " ".join(finished.stderr.split())
    results = json.loads((out / "results.json").read_text())
    assert results["complete"] and results["placement"]["cluster"] == ray_head
    assert results["placement"]["cpus"] == 2 and results["placement"]["gpus"] == 0
    assert sorted(r["problem"] for r in results["problems"]) == ["a.py", "b.py", "nested/c.py"]
    for entry in results["problems"]:
        assert entry["status"] == "verified" and entry["attempts"] == 1
        assert re.fullmatch(r"\S+ \(pid \d+\)", entry["placed_on"])
        assert entry["report"]["correctness"]["interpreter"] is True
    # the three tasks were sent at once to two CPUs, each a worker process of its own while it runs
    assert len({entry["placed_on"] for entry in results["problems"]}) >= 2


def test_a_cluster_that_cannot_be_reached_is_a_clear_error(tmp_path):
    (tmp_path / "a.py").write_text(TINY_PROBLEM)
    finished = subprocess.run(
        [sys.executable, "-m", "drtriton_lsp.cli", "bench", str(tmp_path), "--cluster", f"127.0.0.1:{free_port()}"],
        capture_output=True, text=True, timeout=300,
    )
    said = " ".join(finished.stderr.split())
    assert finished.returncode != 0 and "cannot connect to the Ray cluster at 127.0.0.1:" in said
    assert "ray start --head" in said and "Traceback" not in said


def test_a_problem_whose_ray_worker_is_killed_runs_again_and_its_record_says_so(tmp_path):
    problems = []
    for name in ("killed.py", "spared.py"):
        (tmp_path / name).write_text(TINY_PROBLEM)
        problems.append(suite.Problem(tmp_path / name, name, "fusion"))
    killed: list[int] = []
    kill_once = threading.Lock()

    def on_progress(_number, _total, problem, message):
        started = re.fullmatch(r"started on \S+ \(pid (\d+)\)", message)
        if started and problem.name == "killed.py":
            with kill_once:
                if not killed:
                    killed.append(int(started[1]))
                    os.kill(killed[0], signal.SIGKILL)  # the Ray worker running the problem, mid-task

    results = suite.new_results(command="test", commit="test", suite=str(tmp_path),
                                device={"kind": "cpu", "name": "cpu"}, versions={}, pipeline={})
    with connected("local") as connected_ray:
        places = RayPlaces(connected_ray, "local", "cpu", len(problems))
        assert suite.run_suite(
            problems, results, OptimizeOptions(device="cpu", trials=2), None, save=lambda _: None,
            on_progress=on_progress, on_done=lambda *_: None, places=places,
        )
    by_name = {entry["problem"]: entry for entry in results["problems"]}
    assert killed, "the problem never said where it started"
    assert by_name["killed.py"]["status"] == "verified" and by_name["killed.py"]["attempts"] == 2
    assert f"(pid {killed[0]})" not in by_name["killed.py"]["placed_on"]  # it finished in another worker
    assert by_name["spared.py"]["status"] == "verified" and by_name["spared.py"]["attempts"] == 1
