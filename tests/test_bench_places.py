"""`drtriton bench --gpus N` on this host: problems spread over GPUs, each problem's workers seeing one GPU with a lock
and memory account of its own, and the placement options refused where they do not go together. On a machine with two
GPUs (marked gpu, skipped with fewer): a bench and a search spread over both.
"""

from __future__ import annotations

import collections
import json
import subprocess
import sys
import threading

import pytest

from drtriton_lsp.bench import placement, suite
from drtriton_lsp.bench.placement import local_places
from drtriton_lsp.cli import build_parser, check_bench_placement
from drtriton_lsp.engine.gpus import GpuSlot, check_gpu_count, visible_gpu_ids
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.local import LocalRunner
from drtriton_lsp.runners.protocol import CPU_SET_VARIABLE, GPU_LOCK_VARIABLE
from drtriton_lsp.worker import main as worker_main
from tests.test_bench import TINY_PROBLEM, gpu_results, record


def test_problems_spread_over_the_gpus_each_with_its_own_gpu_lock_and_memory(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "4,6,7")
    problems = [suite.Problem(tmp_path / f"p{i}.py", f"p{i}.py", "fusion") for i in range(8)]
    guard = threading.Lock()
    running: collections.Counter = collections.Counter()
    most_per_gpu: collections.Counter = collections.Counter()
    seen: dict[str, tuple[str, object]] = {}
    messages = []
    four_at_once = threading.Barrier(4, timeout=30)  # met only when every place runs a problem at the same time

    def run_problem(problem, _options, _copy, progress, cancel=None, new_runner=None, gpu_memory=None):
        environment = new_runner().extra_env
        gpu = environment["CUDA_VISIBLE_DEVICES"]
        progress("verifying")
        with guard:
            running[gpu] += 1
            most_per_gpu[gpu] = max(most_per_gpu[gpu], running[gpu])
            seen[problem.name] = (gpu, environment[GPU_LOCK_VARIABLE], gpu_memory)
        try:
            four_at_once.wait()
        except threading.BrokenBarrierError:
            pass  # fewer ran at once: the counts below say so
        with guard:
            running[gpu] -= 1
        return record(problem.name, "fusion", vs_eager=2.0, vs_compile=1.5)

    monkeypatch.setattr(suite, "run_problem", run_problem)
    results = gpu_results([])
    new_runner = lambda env: LocalRunner(extra_env=env)  # noqa: E731
    with local_places(new_runner, gpus=2, jobs=2, gpu_memory_bytes=80 * 1024**3) as places:
        assert places.concurrency == 4
        assert suite.run_suite(
            problems, results, None, None, save=lambda _: None,
            on_progress=lambda _n, _t, problem, message: messages.append((problem.name, message)),
            on_done=lambda *_: None, places=places,
        )
    gpus = {gpu for gpu, _lock, _memory in seen.values()}
    assert gpus == {"4", "6"}  # the first two of the GPUs this process sees, by their ids
    assert dict(most_per_gpu) == {"4": 2, "6": 2}  # --jobs 2 on each, never more
    locks = {gpu: {lock for g, lock, _ in seen.values() if g == gpu} for gpu in gpus}
    assert all(len(names) == 1 for names in locks.values()) and locks["4"] != locks["6"]
    memories = {gpu: {id(memory) for g, _, memory in seen.values() if g == gpu} for gpu in gpus}
    assert all(len(accounts) == 1 for accounts in memories.values()) and memories["4"] != memories["6"]
    placed = {r["problem"]: r["placed_on"] for r in results["problems"]}
    assert set(placed.values()) == {"GPU 4", "GPU 6"}
    assert all(placed[name] == f"GPU {seen[name][0]}" for name in placed)
    assert all(message.startswith(f"GPU {seen[name][0]}: ") for name, message in messages)
    assert results["placement"] == {"gpus": 2, "jobs_per_gpu": 2}


def test_one_problem_per_gpu_still_gets_a_lock_per_gpu_and_no_shared_memory_account(tmp_path):
    with local_places(lambda env: LocalRunner(extra_env=env), gpus=2, jobs=1, gpu_memory_bytes=80 * 1024**3) as places:
        assert [slot.env["CUDA_VISIBLE_DEVICES"] for slot in places.slots] == ["0", "1"]
        assert len({slot.env[GPU_LOCK_VARIABLE] for slot in places.slots}) == 2
        assert [slot.memory for slot in places.slots] == [None, None]


def test_a_lock_the_caller_set_is_kept_on_a_single_gpu(monkeypatch, tmp_path):
    monkeypatch.setenv(GPU_LOCK_VARIABLE, str(tmp_path / "outer.lock"))
    with local_places(lambda env: LocalRunner(extra_env=env), jobs=2) as places:
        assert places.slots[0].env == {}  # the workers inherit the caller's lock


def test_more_gpus_than_there_are_is_refused_with_what_to_pass(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,3")
    with pytest.raises(DrtritonError, match="names only 2") as caught:
        visible_gpu_ids(3)
    assert "--gpus 2" in caught.value.hint
    with pytest.raises(DrtritonError, match="sees 2 GPUs"):
        check_gpu_count(4, "cuda", {"cuda_device_count": 2})
    with pytest.raises(DrtritonError, match="needs CUDA GPUs"):
        check_gpu_count(2, "cpu", {"cuda_device_count": 0})
    check_gpu_count(2, "cuda", {"cuda_device_count": 2})
    check_gpu_count(1, "cpu", {"cuda_device_count": 0})


@pytest.mark.parametrize(
    "options, refused",
    [
        (["--cluster", "local", "--jobs", "2"], "--cluster places the problems itself"),
        (["--cluster", "ray://head:10001", "--gpus", "2"], "--cluster places the problems itself"),
        (["--cluster", "local", "--remote", "ssh://gpu"], "--cluster places the problems itself"),
        (["--remote", "ssh://gpu", "--gpus", "2"], "not supported"),
        (["--remote", "ssh://gpu", "--jobs", "2"], "not supported"),
    ],
)
def test_placement_options_that_do_not_go_together_are_refused_before_anything_starts(options, refused):
    args = build_parser().parse_args(["bench", "problems", *options])
    with pytest.raises(DrtritonError, match=refused):
        check_bench_placement(args)


def test_placement_options_that_go_together_pass():
    for options in ([], ["--gpus", "4", "--jobs", "2"], ["--cluster", "auto"], ["--remote", "ssh://gpu"]):
        check_bench_placement(build_parser().parse_args(["bench", "problems", *options]))


def two_gpus_or_skip() -> None:
    import torch

    if torch.cuda.device_count() < 2:
        pytest.skip("needs two CUDA GPUs (the nvidia-h200-x2 machine)")


@pytest.mark.gpu
def test_bench_spreads_its_problems_over_two_gpus_and_times_each_alone_there(tmp_path):
    two_gpus_or_skip()
    problems = tmp_path / "problems"
    problems.mkdir()
    for number in range(4):
        (problems / f"p{number}.py").write_text(TINY_PROBLEM)
    finished = subprocess.run(
        [sys.executable, "-m", "drtriton_lsp.cli", "bench", str(problems), "--device", "cuda", "--gpus", "2",
         "--trials", "2", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=900,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    results = json.loads((tmp_path / "out" / "results.json").read_text())
    assert results["placement"] == {"gpus": 2, "jobs_per_gpu": 1}
    assert all(record["status"] == "verified" and record["timing"] for record in results["problems"])
    assert len({record["placed_on"] for record in results["problems"]}) == 2


@pytest.mark.gpu
def test_a_search_over_two_gpus_verifies_and_reports_its_fragments(example_copy, tmp_path):
    two_gpus_or_skip()
    finished = subprocess.run(
        [sys.executable, "-m", "drtriton_lsp.cli", "optimize", str(example_copy("mlp_block.py")), "--device", "cuda",
         "--search", "--search-seconds", "30", "--gpus", "2", "--search-cache", str(tmp_path / "cache"),
         "--json", str(tmp_path / "report.json")],
        capture_output=True, text=True, timeout=900,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    report = json.loads((tmp_path / "report.json").read_text())
    report = report[0] if isinstance(report, list) else report
    assert report["status"] == "verified" and report["search"]["fragments"]


def test_each_problem_at_a_time_gets_whole_cores_of_its_own(monkeypatch):
    # eight hardware threads on four cores, each core's two threads 4 apart (as Linux numbers them on many machines)
    monkeypatch.setattr(placement.os, "sched_getaffinity", lambda _pid: set(range(8)))
    monkeypatch.setattr(placement, "_core_of", lambda cpu: (cpu % 4, cpu % 4 + 4))
    assert placement.cpu_shares(2) == [[0, 1, 4, 5], [2, 3, 6, 7]]
    assert placement.cpu_shares(3) == [[0, 1, 4, 5], [2, 6], [3, 7]]  # the first share takes the odd core
    assert placement.cpu_shares(1) == [] and placement.cpu_shares(5) == []  # one problem, or fewer cores than problems

    environments = []
    places = placement.LocalPlaces(
        [GpuSlot(None, {"CUDA_VISIBLE_DEVICES": "0"}, None)], 2, environments.append, share_cpus=True
    )
    assert places.describe() == {"gpus": 1, "jobs_per_gpu": 2, "cpus_per_job": [4, 4]}
    with places._take_slot() as (_, first), places._take_slot() as (_, second):
        assert {first[CPU_SET_VARIABLE], second[CPU_SET_VARIABLE]} == {"0,1,4,5", "2,3,6,7"}
        assert first["OMP_NUM_THREADS"] == first["TORCHINDUCTOR_COMPILE_THREADS"] == "4"
    with places._take_slot() as (_, again):
        assert again[CPU_SET_VARIABLE] in ("0,1,4,5", "2,3,6,7")  # a finished problem's share is given again
    unshared = placement.LocalPlaces([GpuSlot(None, {}, None)], 2, environments.append)
    with unshared._take_slot() as (_, share):
        assert share == {} and "cpus_per_job" not in unshared.describe()


def test_a_worker_keeps_to_the_cpus_it_is_given(monkeypatch):
    pinned = []
    monkeypatch.setattr(worker_main.os, "sched_setaffinity", lambda pid, cpus: pinned.append((pid, cpus)))
    monkeypatch.delenv(CPU_SET_VARIABLE, raising=False)
    worker_main.keep_to_given_cpus()
    monkeypatch.setenv(CPU_SET_VARIABLE, "2,3,6,7")
    worker_main.keep_to_given_cpus()
    assert pinned == [(0, {2, 3, 6, 7})]
