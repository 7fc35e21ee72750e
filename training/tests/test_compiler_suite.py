"""The compiler's synthetic suite (benchmarks/compiler_suite.py): deterministic, as claimed, regenerable.

Lives with the training tests because the generator imports drtriton_training (the product never does).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import sys
from collections import Counter
from pathlib import Path

import pytest

from drtriton_training.operators import default_registry

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "compiler_suite.py"


def load_suite_module():
    spec = importlib.util.spec_from_file_location("compiler_suite", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module through sys.modules
    spec.loader.exec_module(module)
    return module


suite = load_suite_module()


def test_committed_suite_regenerates_byte_for_byte():
    assert suite.check_suite(suite.SUITE_DIR) == []


def test_committed_suite_covers_the_families_dtypes_and_op_counts_claimed():
    index = json.loads((suite.SUITE_DIR / suite.INDEX_NAME).read_text())
    spec = suite.SuiteSpec.from_json(index["generator"])
    problems = index["problems"]
    assert spec == suite.SuiteSpec() and len(problems) == 100
    assert Counter(problem["dtype"] for problem in problems) == {"float32": 60, "float16": 20, "bfloat16": 20}
    assert {len(problem["ops"]) for problem in problems} == set(range(1, 7))
    families = {family for problem in problems for family in problem["families"]}
    assert families == set(default_registry().families()) - {"conv"}
    files = sorted(path.name for path in suite.SUITE_DIR.glob(suite.PROBLEM_GLOB))
    assert files == sorted(problem["file"] for problem in problems)
    for problem in problems:
        source = (suite.SUITE_DIR / problem["file"]).read_bytes()
        assert hashlib.sha256(source).hexdigest() == problem["sha256"]
        assert problem["file"].endswith("_" + "_".join(problem["ops"]) + ".py")
        if problem["dtype"] != "float32":
            assert f"dtype=torch.{problem['dtype']}".encode() in source
    sizes = [size for problem in problems for shape in problem["input_shapes"] for size in shape if size > 1]
    assert sum(bool(size & (size - 1)) for size in sizes) >= 0.6 * len(sizes)
    assert sum(size % 2 for size in sizes) >= 0.4 * len(sizes)


def test_generation_is_deterministic_and_follows_the_seed():
    spec = suite.SuiteSpec(seed=5, count=6)
    files, index = suite.generate_suite(spec)
    assert suite.generate_suite(spec) == (files, index)
    assert sorted(len(problem["ops"]) for problem in index["problems"]) == [1, 2, 3, 4, 5, 6]
    other_files, _ = suite.generate_suite(suite.SuiteSpec(seed=6, count=6))
    assert set(other_files.values()) != set(files.values())


def test_check_names_changed_missing_and_extra_files(tmp_path):
    files, index = suite.generate_suite(suite.SuiteSpec(seed=5, count=3))
    suite.write_suite(files, index, tmp_path)
    assert suite.check_suite(tmp_path) == []
    first, second, _ = sorted(files)
    (tmp_path / first).write_text(files[first].replace("def forward", "def  forward"))
    (tmp_path / second).rename(tmp_path / "p999_relu.py")
    differences = suite.check_suite(tmp_path)
    assert any(line.startswith(f"differs: {first}") for line in differences)
    assert f"missing (the generator writes it): {second}" in differences
    assert "extra (the generator does not write it): p999_relu.py" in differences


def test_dtype_shares_are_split_exactly():
    assert suite.apportion(100, suite.DEFAULT_DTYPE_SHARES) == [("float32", 60), ("float16", 20), ("bfloat16", 20)]
    assert sum(number for _, number in suite.apportion(7, suite.DEFAULT_DTYPE_SHARES)) == 7


def test_odd_sizes_rule():
    assert suite.has_odd_sizes([[3, 8]], [[3, 8]])
    assert not suite.has_odd_sizes([[4, 8]], [[12]])  # no odd input size
    assert not suite.has_odd_sizes([[3, 8, 16, 1]], [[8, 16, 32]])  # mostly powers of two


def test_summary_counts_compute_ops_without_views_or_convolutions():
    records = [
        {"file": "a.py", "dtype": "float32", "ops": ["relu", "sum"], "status": "verified", "reason": None,
         "seconds": 2.0, "replaced_ops": ["aten.relu.default", "aten.view.default"],
         "kept_ops": ["aten.sum.dim_IntList"]},
        {"file": "b.py", "dtype": "float16", "ops": ["softmax"], "status": "failed", "reason": "wrong_result",
         "seconds": 4.0, "replaced_ops": ["aten.exp.default"],
         "kept_ops": ["aten.convolution.default", "aten.permute.default", "aten.broadcast_tensors.default",
                      "aten.sum.dim_IntList"]},
    ]
    summary = suite.summarize(records)
    counts = summary["compute_ops"], summary["compute_ops_in_triton"], summary["compute_ops_in_triton_verified"]
    assert counts == (4, 2, 1)
    assert (summary["triton_op_percent"], summary["triton_op_percent_verified"]) == (50.0, 25.0)
    assert summary["verified_percent"] == 50.0
    assert summary["failures_by_reason"] == {"wrong_result": 1}
    assert summary["kept_ops_by_frequency"] == {"aten.sum.dim_IntList": 2}
    assert summary["by_dtype"] == {"float16": "0/1", "float32": "1/1"}
    assert summary["seconds_per_problem_mean"] == 3.0


@pytest.mark.slow
def test_run_writes_results_for_a_problem(tmp_path, capsys):
    files, index = suite.generate_suite(suite.SuiteSpec(seed=5, count=1))
    suite.write_suite(files, index, tmp_path / "suite")
    suite_options = ["--suite", str(tmp_path / "suite"), "--out", str(tmp_path), "--name", "t"]
    assert suite.main(["run", "--device", "cpu", "--trials", "1", *suite_options]) == 0
    results = json.loads((tmp_path / "compiler-suite-t.json").read_text())
    (record,) = results["problems"]
    assert record["file"] == index["problems"][0]["file"] and record["status"] in ("verified", "failed", "no_candidate")
    assert results["complete"] and results["summary"]["problems"] == 1
    assert results["versions"]["torch"] and results["commit"]
    assert "## Summary" in (tmp_path / "compiler-suite-t.md").read_text()
    assert "[  1/1]" in capsys.readouterr().out
