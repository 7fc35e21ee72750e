"""Verifying and timing a stored kernel again: the same source, never regenerated; new seeds and the trials
asked for; the report keeps the run it repeats; refusals (no kernel, not verified, no GPU) say what to do.

Re-verification runs real workers on the CPU; re-timing needs a GPU, so a stand-in runner answers for it.
"""

from __future__ import annotations

from typing import Any

import pytest

from drtriton_lsp.engine.devices import DeviceOption, resolve_device
from drtriton_lsp.engine.pipeline import (
    NOT_VERIFIED_NOTE,
    RESEED_STEP,
    OptimizeOptions,
    Outcome,
    retime_outcome,
    reverify_outcome,
)
from drtriton_lsp.engine.report import SearchSection, build_report, one_line, to_markdown, worth_writing_back
from drtriton_lsp.engine.session import WorkerSession
from drtriton_lsp.engine.verify import Verdict
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.local import LocalRunner
from drtriton_lsp.task import Task
from tests.conftest import FIXTURES

VERIFY_FIXTURES = FIXTURES / "verify"
TASK = Task.from_file(VERIFY_FIXTURES / "task_scale_relu.py")
GPU = {"kind": "cuda", "name": "NVIDIA H200"}
CPU = {"kind": "cpu-interpreter", "name": "AMD EPYC"}
EDITOR_DEVICE = DeviceOption(chosen="the drtriton.device setting is {device}", change="set drtriton.device to {device}")
TIMING = {
    "eager_ms": 1.0,
    "compile_ms": 0.8,
    "triton_ms": 0.5,
    "speedup_vs_eager": 2.0,
    "speedup_vs_compile": 1.6,
    "method": "CUDA events",
    "calls": {},
    "flags": [],
    "notes": "",
}


def stored_outcome(candidate: str = "good", *, status: str = "verified", device=CPU, timing=None) -> Outcome:
    """An outcome as a generate job stores it: 2 trials from seed 0, the candidate's source in the report."""
    verdict = Verdict(status == "verified", None, "", interpreter=device == CPU, trials=2, passed=2)
    report = build_report(
        file=str(VERIFY_FIXTURES / "task_scale_relu.py"),
        target="ScaleRelu",
        status=status,
        device=device,
        verdict=verdict,
        timing=timing,
        timing_note="" if timing else "no GPU",
        search=SearchSection(backend="compiler", candidates=1, verified=1, seconds=1.0),
        kernel_source=(VERIFY_FIXTURES / f"{candidate}.py").read_text(),
        schedule="schedule v1",
        replaced_ops=["aten.mul", "aten.add", "aten.relu"],
        kept_ops=[],
        message="" if status == "verified" else "the results differ from the reference",
    )
    return Outcome(report, task=TASK)


def session_for(runner) -> WorkerSession:
    """The session a job on the stored outcome's file runs its workers in."""
    return WorkerSession.for_file(runner, str(VERIFY_FIXTURES / "task_scale_relu.py"))


class RecordingRunner(LocalRunner):
    """A real local runner that remembers which worker methods were called, with what."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def call(self, method, params, **options):
        self.calls.append((method, params))
        return super().call(method, params, **options)


class StandInRunner:
    """Answers like a worker on a machine with (or without) a GPU; runs nothing."""

    host = None  # "this machine", as a local runner's

    def __init__(self, cuda: bool = True, device_name: str = GPU["name"]) -> None:
        self.cuda = cuda
        self.device_name = device_name
        self.calls: list[tuple[str, dict[str, Any]]] = []

    def call(self, method, params, **options):
        self.calls.append((method, params))
        if method == "capabilities":
            return {
                "cuda_available": self.cuda,
                "cuda_device_name": self.device_name if self.cuda else None,
                "cpu_name": CPU["name"],
                "versions": {"python": "3.12", "torch": "2.11", "triton": "3.6", "cuda": "12.8"},
            }
        if method == "benchmark":
            return {"timing": {**TIMING, "triton_ms": 0.25, "speedup_vs_eager": 4.0, "speedup_vs_compile": 3.2}, "reason": ""}
        raise AssertionError(f"unexpected worker method {method}")


@pytest.mark.slow
def test_reverify_judges_the_stored_source_again_with_new_seeds_and_the_trials_asked_for():
    outcome = stored_outcome()
    runner = RecordingRunner()

    again = reverify_outcome(outcome, options=OptimizeOptions(device="cpu", trials=3), session=session_for(runner))

    assert [method for method, _ in runner.calls] == ["capabilities", "verify"]
    verify_params = runner.calls[1][1]
    assert verify_params["candidate"] == outcome.report["kernel"]["source"]
    assert (verify_params["trials"], verify_params["seed"]) == (3, RESEED_STEP)
    report = again.report
    assert report["status"] == "verified"
    assert report["kernel"] == outcome.report["kernel"] and again.task is outcome.task
    correctness = report["correctness"]
    assert [shape["label"] for shape in correctness["shapes"]].count("primary") == 3  # the trials asked for
    assert correctness["passed"] == correctness["trials"] == 6  # plus strided, autograd with keywords, odd-size
    assert correctness["seed"] == RESEED_STEP
    previous = correctness["previous_run"]
    assert (previous["status"], previous["trials"], previous["seed"], previous["device"]) == ("verified", 2, 0, CPU)
    assert one_line(report) == "ScaleRelu: re-verified (6/6 trials, new inputs) · no speed measured: no GPU"
    assert "| re-verified | with new inputs (seed base 10000); before: verified, 2/2 trials, seed base 0," in to_markdown(report)
    assert outcome.report["correctness"]["previous_run"] is None  # the stored outcome itself is left as it was

    third = reverify_outcome(again, options=OptimizeOptions(device="cpu", trials=1), session=session_for(LocalRunner()))
    assert third.report["correctness"]["seed"] == 2 * RESEED_STEP


@pytest.mark.slow
def test_reverify_of_a_wrong_kernel_fails_it_and_drops_its_timing():
    outcome = stored_outcome("wrong_result", device=CPU)

    again = reverify_outcome(outcome, options=OptimizeOptions(device="cpu", trials=2), session=session_for(LocalRunner()))

    assert again.report["status"] == "failed"
    assert again.report["message"].startswith("the results differ from the reference")
    assert (again.report["timing"], again.report["timing_note"]) == (None, NOT_VERIFIED_NOTE)
    assert not worth_writing_back(again.report)


def test_reverify_refuses_an_outcome_without_a_kernel_before_starting_any_worker():
    outcome = stored_outcome()
    outcome.report["status"] = "no_candidate"
    outcome.report["kernel"]["source"] = None
    runner = StandInRunner()
    with pytest.raises(DrtritonError, match="nothing was generated for it .* no kernel to verify"):
        reverify_outcome(outcome, options=OptimizeOptions(device="cpu"), session=session_for(runner))
    assert runner.calls == []


def test_retime_times_the_stored_source_on_the_gpu_it_was_verified_on_and_keeps_the_earlier_timing():
    outcome = stored_outcome(device=GPU, timing=TIMING)
    runner = StandInRunner()

    again = retime_outcome(outcome, options=OptimizeOptions(device="auto"), session=session_for(runner))

    assert [method for method, _ in runner.calls] == ["capabilities", "benchmark"]
    assert runner.calls[1][1] == {
        "task": TASK.to_json(), "candidate": outcome.report["kernel"]["source"], "max_autotune": False
    }
    report = again.report
    assert (report["status"], report["correctness"], report["kernel"]) == ("verified", outcome.report["correctness"], outcome.report["kernel"])
    assert report["timing"]["speedup_vs_eager"] == 4.0
    assert report["timing"]["previous"]["speedup_vs_eager"] == 2.0
    assert one_line(report) == "ScaleRelu: verified · 4.00x vs eager · 3.20x vs torch.compile · NVIDIA H200"
    assert "| earlier timing | 2.00x vs eager (0.5 ms)," in to_markdown(report)


@pytest.mark.parametrize(
    ("device", "option", "message"),
    [
        ("cpu", None, "no speed measured: --device cpu was asked for; run with --device cuda on a machine with a GPU"),
        ("cpu", EDITOR_DEVICE, "no speed measured: the drtriton.device setting is cpu; set drtriton.device to cuda on a machine with a GPU"),
        ("auto", EDITOR_DEVICE, "no speed measured: no GPU here; set drtriton.device to cuda on a machine with a GPU"),
        ("cuda", EDITOR_DEVICE, "the drtriton.device setting is cuda, but the worker sees no CUDA GPU"),
    ],
)
def test_retime_without_a_gpu_refuses_naming_the_device_option(device, option, message):
    options = OptimizeOptions(device=device) if option is None else OptimizeOptions(device=device, device_option=option)
    runner = StandInRunner(cuda=False)
    with pytest.raises(DrtritonError) as refusal:
        retime_outcome(stored_outcome(device=CPU), options=options, session=session_for(runner))
    assert refusal.value.message == message
    assert "benchmark" not in [method for method, _ in runner.calls]


def test_retime_refuses_a_kernel_that_is_not_verified_or_was_verified_on_another_device():
    runner = StandInRunner()
    with pytest.raises(DrtritonError, match="its kernel is not verified .*; verify it first"):
        retime_outcome(stored_outcome("wrong_result", status="failed"), options=OptimizeOptions(), session=session_for(runner))
    assert runner.calls == []
    with pytest.raises(DrtritonError, match=r"verified on AMD EPYC \(cpu-interpreter\), not on NVIDIA H200; verify it there first"):
        retime_outcome(stored_outcome(device=CPU), options=OptimizeOptions(), session=session_for(runner))
    assert [method for method, _ in runner.calls] == ["capabilities"]


def test_a_refused_cuda_device_is_named_as_the_user_chose_it():
    no_gpu = {"cuda_available": False}
    with pytest.raises(DrtritonError) as on_the_command_line:
        resolve_device("cuda", no_gpu, None)
    assert on_the_command_line.value.message == "--device cuda was asked for, but the worker sees no CUDA GPU"
    assert on_the_command_line.value.hint.startswith("run with --device cpu for verification under the Triton interpreter")
    with pytest.raises(DrtritonError) as in_the_editor:
        resolve_device("cuda", no_gpu, None, EDITOR_DEVICE)
    assert in_the_editor.value.hint.startswith("set drtriton.device to cpu for verification")
