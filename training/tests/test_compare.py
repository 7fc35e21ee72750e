"""`drtriton-train compare`: the held-out programs it writes, the two bench commands, the compiler arm's budget
raised by the model's time, and the arithmetic of the comparison (a failure is never counted as faster).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from drtriton_training import compare
from drtriton_training.compare import COMPILER_ARM, MODEL_ARM, CompareOptions
from drtriton_training.programs import load_heldout


def problem(name, status="verified", vs_compile=None, seconds=10.0, winner=None, model=None):
    """One problem of a bench results.json, as `drtriton bench` writes it (the fields compare reads)."""
    search = {}
    if winner:
        search["winner"] = {"source": winner}
    if model:
        search["model"] = model
    return {
        "problem": name,
        "status": status,
        "seconds": seconds,
        "timing": {"speedup_vs_compile": vs_compile} if vs_compile is not None else None,
        "report": {"search": search},
    }


def results(*problems, command="drtriton bench ...", device="cuda"):
    return {"command": command, "device": {"kind": device, "name": "H200"}, "problems": list(problems)}


def test_the_held_out_programs_are_written_as_kernelbench_files_by_level(tmp_path):
    paths = compare.write_programs((1, 5), 2, tmp_path)
    assert [path.relative_to(tmp_path).as_posix() for path in paths] == [
        "level_01/program_000.py", "level_01/program_001.py", "level_05/program_000.py", "level_05/program_001.py",
    ]
    assert paths[2].read_text() == load_heldout(5)[0].source


def test_each_arm_searches_with_its_own_fresh_cache_and_only_the_model_arm_asks_the_model(tmp_path):
    options = CompareOptions(levels=(1,), per_level=1, device="cuda", samples=3, turns=2, jobs=2)
    model_arm = compare.bench_command(tmp_path / "p", tmp_path / "m", options, 10.0, Path("/models/x"))
    compiler_arm = compare.bench_command(tmp_path / "p", tmp_path / "c", options, 17.0, None)
    assert model_arm[model_arm.index("--search-seconds") + 1] == "10"
    assert compiler_arm[compiler_arm.index("--search-seconds") + 1] == "17"
    assert model_arm[model_arm.index("--search-cache") + 1] == str(tmp_path / "m" / "search-cache")
    assert compiler_arm[compiler_arm.index("--search-cache") + 1] == str(tmp_path / "c" / "search-cache")
    assert model_arm[model_arm.index("--model") + 1:model_arm.index("--model") + 8] == [
        "/models/x", "--model-kind", "script", "--samples", "3", "--turns", "2",
    ]
    assert "--model" not in compiler_arm
    cpu = compare.bench_command(tmp_path / "p", tmp_path / "c", CompareOptions((1,), 1, device="cpu"), 10.0, None)
    assert "--search" not in cpu  # nothing to choose between without timings


def test_a_failed_or_slower_problem_is_not_counted_as_faster_and_the_geomean_is_over_timed_problems():
    summary = compare.arm_summary(results(
        problem("a", vs_compile=2.0, seconds=10, winner="model"),
        problem("b", vs_compile=0.5, seconds=20),
        problem("c", status="rejected", vs_compile=4.0, seconds=30),
        problem("d", status="error", seconds=40),
    ))
    assert summary == {
        "problems": 4, "verified": 2, "timed": 2, "faster_than_compile": 1, "share_faster_than_compile": 0.25,
        "geomean_vs_compile": pytest.approx(1.0), "seconds_per_problem": 25.0, "model_winners": 1,
    }
    on_the_cpu = compare.arm_summary(results(problem("a"), device="cpu"))
    assert (on_the_cpu["faster_than_compile"], on_the_cpu["share_faster_than_compile"]) == (None, None)


def test_the_comparison_pairs_problems_by_name_and_names_each_winner():
    compiler = results(problem("a", vs_compile=1.2), problem("b", vs_compile=0.8))
    combined = results(
        problem("b", vs_compile=1.1, winner="model", model={"answers": 4, "verified": 3, "seconds": 6.0}),
        problem("a", vs_compile=1.2, winner="compiler", model={"answers": 4, "verified": 0, "seconds": 2.0}),
    )
    compared = compare.compare(compiler, combined)
    assert compared["problems"] == [
        {"problem": "b", COMPILER_ARM: 0.8, MODEL_ARM: 1.1, "winner": "model", "model_answers": 4, "model_verified": 3},
        {"problem": "a", COMPILER_ARM: 1.2, MODEL_ARM: 1.2, "winner": "compiler", "model_answers": 4,
         "model_verified": 0},
    ]
    assert (compared[COMPILER_ARM]["faster_than_compile"], compared[MODEL_ARM]["faster_than_compile"]) == (1, 2)
    assert compare.model_seconds_per_problem(combined) == 4.0


def test_the_compiler_alone_gets_the_models_mean_time_added_to_its_search_budget(tmp_path, monkeypatch):
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    (model_dir / "config.json").write_text("{}")
    commands = []

    def fake_bench(command, out, log):
        commands.append(command)
        if "--model" in command:
            return results(
                problem("level_01/program_000.py", vs_compile=1.5, winner="model", model={"seconds": 4.2}),
                problem("level_01/program_001.py", vs_compile=0.9, model={"seconds": 1.0}),
                command="model arm",
            )
        return results(
            problem("level_01/program_000.py", vs_compile=1.0), problem("level_01/program_001.py", vs_compile=0.9),
            command="compiler arm",
        )

    monkeypatch.setattr(compare, "run_arm", fake_bench)
    options = CompareOptions(levels=(1,), per_level=2, device="cuda", search_seconds=10.0)
    compared = compare.run_compare(model_dir, options, tmp_path / "work", log=lambda line: None)
    assert ["--model" in command for command in commands] == [True, False]  # the model arm first
    assert commands[1][commands[1].index("--search-seconds") + 1] == "13"  # 10 + ceil(2.6)
    assert compared["options"]["search_seconds"] == {MODEL_ARM: 10.0, COMPILER_ARM: 13.0}
    assert compared[MODEL_ARM]["model_winners"] == 1
    assert len(list((tmp_path / "work" / "programs").rglob("*.py"))) == 2
    markdown = compare.to_markdown(compared)
    assert "| compiler+model | 2 | 2 | 1 (0.500) |" in markdown
    assert "| level_01/program_000.py | 1.000 | 1.500 | model |" in markdown
    json.dumps(compared)  # the results are plain JSON
