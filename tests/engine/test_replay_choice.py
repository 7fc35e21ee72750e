"""On a GPU `optimize` times a forward whose CUDA-graph replay might pay both ways and keeps the faster verified form.

The choice's logic runs here with stand-in verifications and timings (pipeline._verify_and_time replaced); the
benchmark's two timings are checked on the GPU machine (tests/engine/test_gpu.py).
"""

from __future__ import annotations

import warnings
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.planner import REPLAY_TIMED_FROM_RATIO, replay_estimate, replay_worth_timing
from drtriton_lsp.compiler.script import parse_schedule
from drtriton_lsp.engine import pipeline
from drtriton_lsp.engine.pipeline import OptimizeOptions, StageClock, _Trial, _verify_and_time_replay_choice
from drtriton_lsp.engine.report import SearchSection
from drtriton_lsp.worker.capture import capture_graph


class TwoChains(nn.Module):
    """Two elementwise chains around a flip, which stays in PyTorch: three steps, two of them kernels."""

    def forward(self, x):
        scaled = torch.sigmoid(x) * 3.0
        return torch.tanh(scaled.flip(0)) + 1.0


@pytest.fixture(scope="module")
def graph():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return capture_graph(TwoChains().eval(), (torch.randn(6, 10),))


def compile_schedule(graph):
    return lambda schedule: compile_graph(graph, prefix="two_chains", forward_params=["x"], has_self=True, schedule=schedule)


class StandIn:
    """pipeline._verify_and_time for each form: its verdict's reason (None: verified) and its timing (replayed,
    plain) in ms, the replayed form's benchmark also timing it plainly; records which forms were verified, and which
    were benchmarked."""

    def __init__(self, replayed: tuple[str | None, float, float], plain: tuple[str | None, float] = (None, 1.0)):
        self.forms = {"replayed": replayed, "plain": plain}
        self.verified_forms: list[str] = []
        self.benchmarked_forms: list[str] = []

    def __call__(self, task, graph, program, guards, device, device_info, options, session, clock, stage_prefix="",
                 measured_timing=None):
        form = "replayed" if program.replay else "plain"
        self.verified_forms.append(form)
        reason, triton_ms, *plain_ms = self.forms[form]
        verdict = SimpleNamespace(verified=reason is None, reason=reason)
        timing, plain_timing = None, None
        if reason is None and measured_timing is not None:
            timing = measured_timing
        elif reason is None:
            self.benchmarked_forms.append(form)
            replay = {"replayed_ms": triton_ms, "plain_ms": plain_ms[0]} if program.replay else None
            timing = {"triton_ms": triton_ms, "replay": replay}
            plain_timing = {"triton_ms": plain_ms[0], "replay": None} if program.replay else None
        return _Trial(program, f"# {form}", verdict, timing, "", 0.0, plain_timing)


def choose(graph, monkeypatch, stand_in: StandIn, device="cuda", **options):
    monkeypatch.setattr(pipeline, "_verify_and_time", stand_in)
    search = SearchSection(backend="compiler", candidates=1, verified=0, seconds=0.0)
    default = compile_schedule(graph)(None)
    trial = _verify_and_time_replay_choice(
        None, graph, default, [], device, {}, OptimizeOptions(device=device, **options),
        SimpleNamespace(step=lambda _message: None), StageClock(), search, compile_schedule(graph),
    )
    return trial, search


def test_a_small_forward_of_several_steps_is_worth_timing_replayed(graph):
    steps = parse_schedule(compile_schedule(graph)(None).schedule).steps
    assert len(steps) == 3 and replay_worth_timing(steps, graph)
    assert not replay_worth_timing(steps[:1], graph)  # one step: nothing to save
    estimate = replay_estimate(steps, graph)
    assert estimate.host_s >= REPLAY_TIMED_FROM_RATIO * (estimate.device_s + estimate.copy_s)


def test_the_replayed_form_is_kept_when_it_is_faster(graph, monkeypatch):
    stand_in = StandIn(replayed=(None, 0.10, 0.25))
    trial, search = choose(graph, monkeypatch, stand_in)
    assert trial.program.replay and stand_in.verified_forms == ["replayed"]
    assert search.replay_choice == {"replayed_ms": 0.10, "plain_ms": 0.25, "kept": "replayed"}
    assert search.candidates == 1


def test_a_faster_plain_form_is_verified_on_its_own_and_kept_with_the_timing_measured_beside_the_replayed(
        graph, monkeypatch):
    # a benchmark of its own, in another process, may differ (and re-times the baselines): the choice and the report
    # rest on the two timed back to back
    stand_in = StandIn(replayed=(None, 0.30, 0.20), plain=(None, 0.35))
    trial, search = choose(graph, monkeypatch, stand_in)
    assert not trial.program.replay and stand_in.verified_forms == ["replayed", "plain"]
    assert stand_in.benchmarked_forms == ["replayed"] and trial.timing == {"triton_ms": 0.20, "replay": None}
    assert search.replay_choice["kept"] == "plain"
    assert (search.candidates, search.verified) == (2, 1)  # the caller counts the kept one


def test_within_the_noise_the_replayed_form_stays_without_a_second_verification(graph, monkeypatch):
    stand_in = StandIn(replayed=(None, 0.200, 0.199))
    trial, _ = choose(graph, monkeypatch, stand_in)
    assert trial.program.replay and stand_in.verified_forms == ["replayed"]


def test_a_plain_form_that_fails_its_own_verification_is_never_kept(graph, monkeypatch):
    stand_in = StandIn(replayed=(None, 0.30, 0.20), plain=("wrong_result", 0.0))
    trial, search = choose(graph, monkeypatch, stand_in)
    assert trial.program.replay and search.replay_choice["kept"] == "replayed"


def test_a_failure_only_the_replay_can_cause_falls_back_to_the_plain_form_benchmarked_on_its_own(graph, monkeypatch):
    stand_in = StandIn(replayed=("wrong_under_replay", 0.0, 0.0), plain=(None, 0.2))
    trial, _ = choose(graph, monkeypatch, stand_in)
    assert trial.verdict.verified and not trial.program.replay
    assert stand_in.benchmarked_forms == ["plain"] and trial.timing["triton_ms"] == 0.2


def test_a_failure_both_forms_share_is_not_verified_twice(graph, monkeypatch):
    stand_in = StandIn(replayed=("wrong_result", 0.0, 0.0))
    trial, _ = choose(graph, monkeypatch, stand_in)
    assert not trial.verdict.verified and stand_in.verified_forms == ["replayed"]


@pytest.mark.parametrize(
    "device, options",
    [("cpu", {}), ("cuda", {"benchmark": False}), ("cuda", {"schedule": "kernel pointwise sigmoid,mul"})],
)
def test_without_timings_or_with_a_given_schedule_the_program_is_verified_as_it_is(graph, monkeypatch, device, options):
    stand_in = StandIn(replayed=(None, 0.1, 0.2))
    trial, search = choose(graph, monkeypatch, stand_in, device=device, **options)
    assert stand_in.verified_forms == ["plain"] and search.replay_choice is None
