"""Each pipeline step's worker starts while the step before it runs: on the CPU, the verification runs in the
worker started during the capture, and a guess that missed costs only that worker.
"""

from __future__ import annotations

import signal

import pytest

from drtriton_lsp.engine.pipeline import OptimizeOptions, optimize_target
from drtriton_lsp.runners.local import LocalRunner
from tests.conftest import EXAMPLES

EXAMPLE = EXAMPLES / "scaled_activation_chain.py"


@pytest.mark.slow
def test_the_verification_runs_in_the_worker_started_during_the_capture(started_workers):
    with LocalRunner() as runner:
        outcome = optimize_target(
            EXAMPLE.read_text(), str(EXAMPLE), "ScaledActivation", options=OptimizeOptions(device="cpu", trials=1), runner=runner
        )
    assert outcome.verified
    capture_worker, verification_worker = started_workers  # two steps, two workers: none started in vain
    # each ran its one job and shut down; a spare no job took would have been killed by close()
    assert capture_worker.returncode == verification_worker.returncode == 0


@pytest.mark.slow
def test_a_spare_started_for_the_wrong_device_is_killed_and_the_job_still_runs(started_workers, monkeypatch):
    monkeypatch.setattr("drtriton_lsp.engine.pipeline.likely_device", lambda _requested: "cuda")  # a wrong guess
    with LocalRunner() as runner:
        outcome = optimize_target(
            EXAMPLE.read_text(), str(EXAMPLE), "ScaledActivation", options=OptimizeOptions(device="cpu", trials=1), runner=runner
        )
    assert outcome.verified and outcome.report["device"]["kind"] == "cpu-interpreter"
    capture_worker, wrong_guess, verification_worker = started_workers
    assert wrong_guess.returncode == -signal.SIGKILL
    assert capture_worker.returncode == verification_worker.returncode == 0
