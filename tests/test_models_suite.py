"""The models suite (benchmarks/problems/models/): every file is a KernelBench-form problem of a known category,
and runs in eager once benchmarks/check_problems.py has shrunk its size constants."""

from __future__ import annotations

import ast
import importlib.util
import math
from pathlib import Path

import pytest
import torch

from drtriton_lsp.bench.suite import find_problems

REPO = Path(__file__).resolve().parent.parent
SUITE = REPO / "benchmarks" / "problems" / "models"
CATEGORIES = {"cnn", "transformer", "gemm", "loss", "rnn", "network"}
# Each reduced problem's inputs stay small, so the eager runs below take seconds in all.
REDUCED_INPUT_LIMIT_MB = 32


def _load_checker():
    spec = importlib.util.spec_from_file_location("check_problems", REPO / "benchmarks" / "check_problems.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


checker = _load_checker()
PROBLEM_FILES = sorted(SUITE.glob("*.py"))


def _source_tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(encoding="utf-8"))


def test_the_suite_holds_every_category_and_both_dtypes():
    problems, skipped = find_problems(SUITE)
    assert skipped == [] and len(problems) >= 40
    counts = {category: 0 for category in CATEGORIES}
    for problem in problems:
        counts[problem.category] = counts.get(problem.category, 0) + 1
    assert set(counts) == CATEGORIES and min(counts.values()) >= 3, counts
    bfloat16 = [p.name for p in problems if "torch.bfloat16" in p.path.read_text(encoding="utf-8")]
    assert len(problems) / 4 <= len(bfloat16) <= len(problems) / 2, bfloat16


@pytest.mark.parametrize("path", PROBLEM_FILES, ids=lambda path: path.stem)
def test_problem_file_has_the_kernelbench_shape(path):
    tree = _source_tree(path)
    docstring = ast.get_docstring(tree)
    assert docstring, "a module docstring says what the problem models and its sizes"
    classes = {node.name for node in tree.body if isinstance(node, ast.ClassDef)}
    functions = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
    assert "Model" in classes and {"get_inputs", "get_init_inputs"} <= functions
    constants = {
        target.id: node.value
        for node in tree.body
        if isinstance(node, ast.Assign)
        for target in node.targets
        if isinstance(target, ast.Name) and target.id.isupper()
    }
    assert isinstance(constants.get("CATEGORY"), ast.Constant) and constants["CATEGORY"].value in CATEGORIES
    assert docstring.split(":")[0].lower() == constants["CATEGORY"].value, "the docstring opens with the category"
    # Sizes are plain literals: shrinking one cannot leave a constant derived from it at full size.
    derived = [name for name, value in constants.items() if not _is_literal(value)]
    assert derived == [], f"derive {derived} inside get_inputs/get_init_inputs instead"


def _is_literal(node: ast.expr) -> bool:
    try:
        ast.literal_eval(node)
    except ValueError:
        return False
    return True


@pytest.mark.slow
@pytest.mark.parametrize("path", PROBLEM_FILES, ids=lambda path: path.stem)
def test_problem_runs_in_eager_at_reduced_size(path):
    module = checker.load_problem(path)
    assert checker.shrink(module), "no size constant large enough to shrink"
    model, inputs = checker.build(module)
    assert checker.tensor_megabytes(inputs) <= REDUCED_INPUT_LIMIT_MB
    with torch.no_grad():
        outputs = model(*inputs)
    outputs = outputs if isinstance(outputs, tuple) else (outputs,)
    for output in outputs:
        assert isinstance(output, torch.Tensor) and output.numel() > 0
        if output.is_floating_point():
            assert torch.isfinite(output).all(), "non-finite output: the problem's data or maths is broken"
            assert not math.isclose(output.float().abs().max().item(), 0.0), "an all-zero output checks nothing"
