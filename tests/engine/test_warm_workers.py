"""Each pipeline step's worker starts while the step before it runs: on the CPU, the verification runs in the
worker started during the capture, and a guess that missed costs only that worker. A worker started ahead for
the capture (the language server's warm worker) is handed to the job's runner and runs the capture.
"""

from __future__ import annotations

import signal

import pytest

from drtriton_lsp.engine.pipeline import OptimizeOptions, optimize_target
from drtriton_lsp.engine.session import WorkerSession
from drtriton_lsp.runners.local import LocalRunner, worker_python_path
from tests.conftest import EXAMPLES

EXAMPLE = EXAMPLES / "scaled_activation_chain.py"


@pytest.mark.slow
def test_the_verification_runs_in_the_worker_started_during_the_capture(started_workers):
    with LocalRunner() as runner:
        outcome = optimize_target(
            EXAMPLE.read_text(), str(EXAMPLE), "ScaledActivation", options=OptimizeOptions(device="cpu", trials=1),
            session=WorkerSession.for_file(runner, str(EXAMPLE)),
        )
    assert outcome.verified
    capture_worker, verification_worker = started_workers  # two steps, two workers: none started in vain
    # each ran its one job and shut down; a spare no job took would have been killed by close()
    assert capture_worker.returncode == verification_worker.returncode == 0


@pytest.mark.slow
def test_a_spare_started_for_the_wrong_device_is_killed_and_the_job_still_runs(started_workers, monkeypatch):
    def wrong_guess(_requested: str, _remote: bool = False) -> str:
        return "cuda"

    monkeypatch.setattr("drtriton_lsp.engine.pipeline.likely_device", wrong_guess)
    with LocalRunner() as runner:
        outcome = optimize_target(
            EXAMPLE.read_text(), str(EXAMPLE), "ScaledActivation", options=OptimizeOptions(device="cpu", trials=1),
            session=WorkerSession.for_file(runner, str(EXAMPLE)),
        )
    assert outcome.verified and outcome.report["device"]["kind"] == "cpu-interpreter"
    capture_worker, wrong_guess, verification_worker = started_workers
    assert wrong_guess.returncode == -signal.SIGKILL
    assert capture_worker.returncode == verification_worker.returncode == 0


@pytest.mark.slow
def test_a_worker_started_ahead_for_the_capture_runs_it_in_the_runner_it_is_handed_to(started_workers):
    announced = []
    with LocalRunner() as warm, LocalRunner() as runner:
        warm.prepare(python_path=worker_python_path(str(EXAMPLE)), method="capture", on_start=announced.append)
        warm.prepare(python_path=worker_python_path(str(EXAMPLE)), method="capture", on_start=announced.append)
        runner.take_spare_from(warm)
        outcome = optimize_target(
            EXAMPLE.read_text(), str(EXAMPLE), "ScaledActivation", options=OptimizeOptions(device="cpu", trials=1),
            session=WorkerSession.for_file(runner, str(EXAMPLE)),
        )
    assert outcome.verified
    ahead, verification_worker = started_workers  # the second prepare kept the live one; the capture started none
    assert announced == [ahead.pid]
    assert ahead.returncode == verification_worker.returncode == 0  # it ran the capture, not killed unused
