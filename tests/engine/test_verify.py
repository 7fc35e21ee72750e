"""The verifier rejects each known kind of bad candidate with its named reason, and passes a good one.

Every candidate runs in a worker process; the test process surviving a segfault, a hang and a
memory hog is part of what is tested.
"""

from __future__ import annotations

import time

import pytest

from drtriton_lsp.engine.session import WorkerLimits, WorkerSession
from drtriton_lsp.engine.verify import static_rejection, verify_candidate
from drtriton_lsp.runners.local import JobLimits, LocalRunner
from drtriton_lsp.task import Task
from tests.conftest import FIXTURES

VERIFY_FIXTURES = FIXTURES / "verify"
TASK = Task.from_file(VERIFY_FIXTURES / "task_scale_relu.py")


def verify(name: str, limits: JobLimits | None = None, trials: int = 2):
    return verify_candidate(
        TASK,
        (VERIFY_FIXTURES / f"{name}.py").read_text(),
        session=WorkerSession(LocalRunner(), limits=WorkerLimits(verify=limits or JobLimits())),
        device="cpu",
        trials=trials,
    )


# the checks that need no worker come first: a run stopped at its first failure (-x) gets there soon
@pytest.mark.parametrize(
    ("source", "reason"),
    [
        ((VERIFY_FIXTURES / "try_except.py").read_text(), "try_except_fallback"),
        ("import os\nimport torch\nclass ModelNew(torch.nn.Module):\n    pass\n", "forbidden_construct"),
        ("import drtriton_task\nclass ModelNew:\n    pass\n", "calls_reference"),
        ("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n", "no_triton_kernel"),
        ("import triton\n@triton.jit\ndef k():\n    pass\n", "no_model_new"),
        ("def broken(:\n", "import_error"),
    ],
)
def test_static_checks_reject_without_running(source, reason):
    verdict = static_rejection(source)
    assert verdict is not None and verdict.reason == reason
    assert (verdict.verified, verdict.trials, verdict.passed) == (False, 0, 0)  # the report claims no trial


class RecordingRunner:
    """Stands in for the worker: records what verify_candidate asks of the judge, answers with a verdict."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict]] = []

    def call(self, op: str, params: dict, **options) -> dict:
        self.calls.append((op, params))
        return {"verified": True, "reason": None, "detail": "", "interpreter": True, "trials": params["trials"],
                "passed": params["trials"], "max_abs_err": 0.0, "max_rel_err": 0.0, "tolerance": {}, "shapes": [],
                "checks": {}}


def test_the_judge_gets_five_trials_by_default_and_the_captured_input_shapes_when_there_are_any():
    task = Task.from_file(VERIFY_FIXTURES / "task_scale_relu.py")
    good = (VERIFY_FIXTURES / "good.py").read_text()
    runner = RecordingRunner()
    verdict = verify_candidate(task, good, session=WorkerSession(runner), device="cpu")
    shapes = {"inputs": [["s0", 64]], "ranges": {"s0": [2, None]}}
    verify_candidate(task, good, session=WorkerSession(runner), device="cpu", input_shapes=shapes, trials=2, seed=7)

    (op, first), (_, second) = runner.calls
    assert op == "verify" and first["trials"] == 5 and (verdict.trials, verdict.passed) == (5, 5)
    assert "input_shapes" not in first and second["input_shapes"] == shapes
    assert (second["trials"], second["seed"]) == (2, 7)


def test_static_checks_accept_a_plain_candidate():
    assert static_rejection((VERIFY_FIXTURES / "good.py").read_text()) is None


@pytest.mark.slow
def test_a_correct_hand_written_candidate_passes_every_check():
    verdict = verify("good", trials=3)
    assert verdict.verified, verdict.explanation
    assert verdict.interpreter
    labels = [shape["label"] for shape in verdict.shapes]
    # in the checks' order, though the second process ran the strided and odd-size trials
    assert labels == ["primary"] * 3 + ["strided", "autograd on, keyword arguments", "odd"]
    assert "two processes" in verdict.checks["isolation"]
    assert all(shape["inputs"] for shape in verdict.shapes)  # the keyword call's tensors too
    assert verdict.passed == verdict.trials == 6
    assert verdict.checks["strided_inputs"].startswith("tried")
    assert verdict.checks["state_across_calls"].startswith("checked")
    assert verdict.kept_ops == [] and verdict.replaced_ops == ["aten.add.Tensor", "aten.mul.Tensor", "aten.relu.default"]
    assert verdict.checks["kernels_have_effect"] is True
    assert verdict.checks["triton_launches"] >= 4
    assert verdict.tolerance == {"float32": {"atol": 1e-4, "rtol": 1e-4}}
    assert verdict.checks["graph_replay"] == "not tried: CUDA graphs need a GPU"
    phases = ["reference", "candidate load", "primary trials", "strided trial", "replay trials", "autograd trial",
              "odd sizes", "other calls and instances", "no-op trial", "full size"]
    assert list(verdict.seconds) == phases and all(seconds >= 0 for seconds in verdict.seconds.values())
    assert verdict.seconds["primary trials"] > 0


@pytest.mark.slow
@pytest.mark.parametrize(
    ("candidate", "reason"),
    [
        ("no_launch", "no_triton_launch"),
        ("modifies_input", "modified_inputs"),
        ("stale_memory", "wrong_result"),
        ("calls_reference", "forbidden_construct"),
        ("odd_shape", "wrong_at_odd_shape"),
        ("wrong_result", "wrong_result"),
        ("dummy_kernel", "reference_in_pytorch"),
        ("out_of_bounds", "crashed"),
    ],
)
def test_bad_candidates_are_rejected_with_their_reason(candidate, reason):
    verdict = verify(candidate)
    assert not verdict.verified
    assert verdict.reason == reason, verdict.explanation


@pytest.mark.slow
def test_a_hanging_candidate_is_stopped_within_a_minute_by_the_judges_own_limit():
    started = time.monotonic()
    verdict = verify("hang", limits=JobLimits(timeout_s=600))
    assert (verdict.verified, verdict.reason) == (False, "timeout")
    assert "no answer in" in verdict.detail  # the judge's per-call limit, not the job's
    assert time.monotonic() - started < 60


@pytest.mark.slow
def test_a_memory_hog_is_stopped_by_the_memory_cap():
    verdict = verify("memory_hog", limits=JobLimits(timeout_s=120, memory_bytes=2 * 1024**3))
    assert (verdict.verified, verdict.reason) == (False, "memory_limit")


@pytest.mark.slow
def test_a_size_the_reference_itself_rejects_is_skipped_not_blamed_on_the_candidate():
    verdict = verify_candidate(
        Task.from_file(VERIFY_FIXTURES / "task_index_into_output.py"),
        (VERIFY_FIXTURES / "index_into_output.py").read_text(),
        session=WorkerSession(LocalRunner()),
        device="cpu",
        trials=2,
    )
    assert verdict.verified, verdict.explanation
    assert verdict.checks["odd_shapes"].startswith("skipped where the reference itself cannot run")
    assert "IndexError" in verdict.checks["odd_shapes"]


@pytest.mark.slow
def test_a_float16_result_three_tolerances_off_is_rejected_and_the_report_states_the_tolerance():
    verdict = verify_candidate(
        Task.from_file(VERIFY_FIXTURES / "task_scale_float16.py"),
        (VERIFY_FIXTURES / "off_by_three_tolerances.py").read_text(),
        session=WorkerSession(LocalRunner()),
        device="cpu",
        trials=2,
    )
    assert (verdict.verified, verdict.reason) == (False, "wrong_result")
    assert "atol=0.01, rtol=0.01" in verdict.detail
    assert verdict.tolerance == {"float16": {"atol": 1e-2, "rtol": 1e-2}}
