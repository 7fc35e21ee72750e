"""On a CUDA GPU: verification compiles real kernels, rejects bad candidates, and the benchmark
times eager, torch.compile and Triton in one run (and flags work hidden on a side stream).

Marked `gpu`: skipped without CUDA; run on the GPU machine (see benchmarks/results/).
"""

from __future__ import annotations

import time

import pytest

from drtriton_lsp.engine.pipeline import OptimizeOptions, optimize_target
from drtriton_lsp.engine.session import WorkerLimits, WorkerSession
from drtriton_lsp.engine.verify import verify_candidate
from drtriton_lsp.runners.local import JobLimits, LocalRunner
from drtriton_lsp.task import Task
from tests.conftest import FIXTURES

pytestmark = pytest.mark.gpu
VERIFY_FIXTURES = FIXTURES / "verify"
TASK = Task.from_file(VERIFY_FIXTURES / "task_scale_relu.py")


def verify_on_gpu(name: str, timeout_s: float = 300):
    return verify_candidate(
        TASK,
        (VERIFY_FIXTURES / f"{name}.py").read_text(),
        session=WorkerSession(
            LocalRunner(), limits=WorkerLimits(verify=JobLimits(timeout_s=timeout_s, memory_bytes=16 * 1024**3))
        ),
        device="cuda",
        trials=3,
    )


def test_a_correct_candidate_is_verified_with_compiled_kernels():
    verdict = verify_on_gpu("good")
    assert verdict.verified, verdict.explanation
    assert verdict.interpreter is False
    # tensors cross between the judge and the candidate's process in shared GPU memory, not through files
    assert verdict.checks["tensor_exchange"] == "shared GPU memory (CUDA IPC)"


@pytest.mark.parametrize(
    ("candidate", "reasons"),
    [
        ("no_launch", {"no_triton_launch"}),
        ("modifies_input", {"modified_inputs"}),
        ("stale_memory", {"wrong_result"}),
        ("calls_reference", {"forbidden_construct"}),
        ("odd_shape", {"wrong_at_odd_shape", "out_of_bounds_write"}),
        ("wrong_result", {"wrong_result"}),
        ("dummy_kernel", {"reference_in_pytorch"}),
        # an unmasked store past the end lands in the buffer's guard region (or faults the device)
        ("out_of_bounds", {"out_of_bounds_write", "device_fault"}),
    ],
)
def test_bad_candidates_are_rejected_on_the_gpu_with_their_reason(candidate, reasons):
    verdict = verify_on_gpu(candidate)
    assert not verdict.verified
    assert verdict.reason in reasons, verdict.explanation


def test_a_hanging_candidate_is_stopped_within_a_minute_by_the_judges_own_limit():
    started = time.monotonic()
    verdict = verify_on_gpu("hang", timeout_s=600)
    assert (verdict.verified, verdict.reason) == (False, "timeout")
    assert time.monotonic() - started < 60


def test_benchmark_times_all_three_and_flags_hidden_side_stream_work():
    runner = LocalRunner()
    good = runner.call("benchmark", {"task": TASK.to_json(), "candidate": (VERIFY_FIXTURES / "good.py").read_text()})
    timing = good["timing"]
    assert timing["eager_ms"] > 0 and timing["triton_ms"] > 0 and timing["compile_ms"] > 0
    assert "work_outside_timed_stream" not in timing["flags"]
    # device time queues calls, so the host's launch cost is hidden; a lone call to an idle GPU pays it
    latency = timing["latency"]
    assert latency["triton_ms"] > 0 and latency["eager_ms"] > 0 and latency["compile_ms"] > 0
    assert timing["triton_ms"] <= latency["triton_ms"] * 1.2
    hidden = runner.call("benchmark", {"task": TASK.to_json(), "candidate": (VERIFY_FIXTURES / "side_stream.py").read_text()})
    assert "work_outside_timed_stream" in hidden["timing"]["flags"]


def test_benchmark_times_torch_compile_max_autotune_when_asked_for():
    runner = LocalRunner()
    candidate = (VERIFY_FIXTURES / "good.py").read_text()
    measured = runner.call(
        "benchmark", {"task": TASK.to_json(), "candidate": candidate, "max_autotune": True},
        limits=JobLimits(timeout_s=900),
    )
    timing = measured["timing"]
    assert timing["compile_ms"] > 0 and timing["compile_max_autotune_ms"] > 0, timing["notes"]
    assert timing["speedup_vs_compile_max_autotune"] == timing["compile_max_autotune_ms"] / timing["triton_ms"]


def test_a_host_bound_forward_is_timed_replayed_and_plainly_and_the_faster_verified_form_is_kept():
    problem = FIXTURES / "replay" / "two_chains.py"
    with LocalRunner() as runner:
        outcome = optimize_target(
            problem.read_text(), str(problem), "Model", options=OptimizeOptions(device="cuda", trials=2),
            session=WorkerSession.for_file(runner, str(problem)),
        )
    report = outcome.report
    assert report["status"] == "verified", report["message"]
    choice = report["search"]["replay_choice"]
    assert choice["replayed_ms"] > 0 and choice["plain_ms"] > 0
    replayed = "replay cuda_graph" in report["kernel"]["schedule"]
    assert choice["kept"] == ("replayed" if replayed else "plain")
    # a replayed module's timing says both times; a plain one keeps the timing measured beside the replayed form
    # (baselines of the same process), with no benchmark of its own
    assert (report["timing"]["replay"] is not None) == replayed
    if not replayed:
        assert report["timing"]["triton_ms"] == choice["plain_ms"]
        assert "plain benchmark" not in report["search"]["stages_s"] and "plain verify" in report["search"]["stages_s"]
