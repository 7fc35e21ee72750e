"""benchmarks/multi_gpu.py, which compares a bench on several GPUs with one on a single GPU: throughput, each
problem's timings against its own on one GPU, and outcomes that changed; and its `run` end to end on the CPU.
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys

import pytest

from tests.test_bench import TINY_PROBLEM
from tests.test_docs import REPO

SCRIPT = REPO / "benchmarks" / "multi_gpu.py"


def load_script():
    spec = importlib.util.spec_from_file_location("multi_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_folder(path, problems, started, updated, placement=None):
    path.mkdir(parents=True)
    document = {
        "commit": "abc123", "device": {"kind": "cuda", "name": "NVIDIA H200"}, "versions": {"torch": "2.11.0"},
        "started": started, "updated": updated, "problems": problems,
    }
    if placement:
        document["placement"] = placement
    (path / "results.json").write_text(json.dumps(document))
    return path


def timed(name, status="verified", eager=1.0, compile_=0.5, triton=0.4, placed_on=None):
    record = {"problem": name, "status": status, "timing": {"eager_ms": eager, "compile_ms": compile_,
                                                             "triton_ms": triton}}
    if placed_on:
        record["placed_on"] = placed_on
    return record


def test_comparing_two_runs_gives_throughput_timing_agreement_and_changed_outcomes(tmp_path):
    one = bench_folder(tmp_path / "one", [timed("a.py"), timed("b.py"), timed("c.py"), {
        "problem": "d.py", "status": "verified", "timing": None}],
        "2026-12-03T10:00:00+00:00", "2026-12-03T10:04:00+00:00")
    many = bench_folder(tmp_path / "many", [
        timed("a.py", triton=0.41, placed_on="GPU 0"),  # 2.5 % slower
        timed("b.py", triton=0.5, placed_on="GPU 1"),  # 25 % slower: outside the bar
        timed("c.py", placed_on="GPU 0"),
        {"problem": "d.py", "status": "wrong_result", "timing": None},
    ], "2026-12-03T11:00:00+00:00", "2026-12-03T11:02:00+00:00", placement={"gpus": 2, "jobs_per_gpu": 1})
    script = load_script()
    assert script.main(["compare", str(one), str(many), "--name", "t", "--results", str(tmp_path)]) == 0
    document = json.loads((tmp_path / "multi-gpu-t.json").read_text())
    comparison = document["comparison"]
    assert comparison["gpus"] == 2 and comparison["throughput_gain"] == 2.0
    assert comparison["problems_per_minute"] == {"one": 1.0, "many": 2.0}
    triton = comparison["timing_agreement"]["triton_ms"]
    assert triton["problems"] == 3 and triton["share_within"] == pytest.approx(2 / 3)
    assert triton["worst_deviation"] == pytest.approx(0.25) and triton["median_deviation"] == pytest.approx(0.025)
    assert comparison["timing_agreement"]["eager_ms"]["share_within"] == 1.0
    assert comparison["status_changes"] == [{"problem": "d.py", "one": "verified", "many": "wrong_result"}]
    markdown = (tmp_path / "multi-gpu-t.md").read_text()
    assert "Throughput: 2.0x one GPU's." in markdown
    assert "d.py: verified on one GPU, wrong_result on several" in markdown
    assert document["commit"] == "abc123" and "benchmarks/multi_gpu.py compare" in document["command"]


@pytest.mark.slow
def test_run_benches_one_gpu_then_several_and_writes_the_comparison(tmp_path):
    problems = tmp_path / "problems"
    problems.mkdir()
    for name in ("a.py", "b.py"):
        (problems / name).write_text(TINY_PROBLEM)
    finished = subprocess.run(
        [sys.executable, str(SCRIPT), "run", str(problems), "--gpus", "1", "--out", str(tmp_path / "runs"),
         "--name", "cpu", "--results", str(tmp_path), "--", "--device", "cpu", "--trials", "1"],
        capture_output=True, text=True, timeout=600, cwd=REPO,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    comparison = json.loads((tmp_path / "multi-gpu-cpu.json").read_text())["comparison"]
    assert comparison["problems"] == {"one": 2, "many": 2} and comparison["status_changes"] == []
    assert comparison["timing_agreement"] == {}  # nothing is timed on the CPU
    assert all((tmp_path / "runs" / run / "results.json").exists() for run in ("one", "many"))
