"""The benchmark's timing loops on a simulated GPU: every timed call starts with a cold L2 cache, the flush itself
is never timed, and work that escapes the timed stream is recognised.

CUDA events and synchronize are replaced by a fake device clock (the loops are plain Python around them), so this
runs on the CPU; tests/engine/test_gpu.py times real kernels on the GPU machine.
"""

from __future__ import annotations

import types

import pytest
import torch

from drtriton_lsp.worker import benchmark

FLUSH_MS = 5.0  # what writing the flush buffer costs on the simulated device
COLD_CALL_MS = 2.0  # a call that finds its data out of the L2 cache
WARM_CALL_MS = 1.0  # a call that finds its data in the L2 cache (left there by the call before)


class SimulatedDevice:
    """A device clock in milliseconds and an L2 cache that the flush empties and each call fills."""

    def __init__(self) -> None:
        self.now_ms = 0.0
        self.cache_is_cold = True
        self.calls = 0

    def call(self) -> None:
        self.now_ms += COLD_CALL_MS if self.cache_is_cold else WARM_CALL_MS
        self.cache_is_cold = False
        self.calls += 1


class FlushBuffer:
    def __init__(self, device: SimulatedDevice) -> None:
        self.device = device

    def zero_(self) -> None:
        self.device.now_ms += FLUSH_MS
        self.device.cache_is_cold = True


@pytest.fixture
def device(monkeypatch) -> SimulatedDevice:
    simulated = SimulatedDevice()

    class Event:
        def __init__(self, enable_timing: bool = False) -> None:
            assert enable_timing
            self.at_ms: float | None = None

        def record(self) -> None:
            self.at_ms = simulated.now_ms

        def elapsed_time(self, end: Event) -> float:
            return end.at_ms - self.at_ms

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *args, **kwargs: None)
    return simulated


def test_every_timed_call_finds_a_cold_cache_and_the_flush_is_not_timed(device):
    timed = benchmark.time_calls(device.call, FlushBuffer(device))
    # device time and latency are both cold-call times: a call timed after another without a flush would be
    # WARM_CALL_MS, and a flush inside the timed span would add FLUSH_MS
    assert timed["median_ms"] == COLD_CALL_MS
    assert timed["median_latency_ms"] == COLD_CALL_MS
    assert benchmark.MIN_CALLS <= timed["calls"] <= benchmark.MAX_CALLS
    assert device.calls == benchmark.WARMUP_CALLS + 2 * timed["calls"]  # warm-up, then the same count for each measure


def test_host_time_is_each_calls_wall_time_and_a_long_budget_stops_at_the_call_cap(device, monkeypatch):
    # the host clock follows the device's (a host that waits for each call): a call's host time is its device time,
    # and the time budget (2 s) holds more than MAX_CALLS flushed calls (7 ms each), so the cap ends the loop
    monkeypatch.setattr(benchmark, "time", types.SimpleNamespace(perf_counter=lambda: device.now_ms / 1e3))
    timed = benchmark.time_calls(device.call, FlushBuffer(device))
    assert timed["median_host_ms"] == pytest.approx(COLD_CALL_MS)
    assert timed["calls"] == benchmark.MAX_CALLS == 200


def test_a_short_time_budget_still_times_the_minimum_number_of_calls(device, monkeypatch):
    monkeypatch.setattr(benchmark, "time", types.SimpleNamespace(perf_counter=lambda: device.now_ms))  # 1000x slower
    assert benchmark.time_calls(device.call, FlushBuffer(device))["calls"] == benchmark.MIN_CALLS == 10


def test_a_torch_compile_failure_is_a_note_not_a_crash(monkeypatch):
    def failing_compile(model, mode=None):
        raise RuntimeError("inductor is not available")

    monkeypatch.setattr(torch, "compile", failing_compile)
    notes: list[str] = []
    assert benchmark._time_compiled(lambda x: x, [torch.ones(1)], None, "max-autotune", notes) is None
    assert notes == ["torch.compile (mode max-autotune) failed: RuntimeError: inductor is not available"]


def test_queued_calls_are_each_timed_after_their_own_flush(device):
    times = benchmark.queued_device_times(device.call, FlushBuffer(device), calls=7)
    assert times == [COLD_CALL_MS] * 7


def test_work_outside_the_timed_stream_is_recognised_from_the_host_clock():
    eager = {"median_latency_ms": 1.0, "median_host_ms": 1.1}
    honest = {"median_latency_ms": 0.5, "median_host_ms": 0.62}
    hidden = {"median_latency_ms": 0.5, "median_host_ms": 2.0}  # the host waited for work the events missed
    assert not benchmark._hidden_work(eager, honest)
    assert benchmark._hidden_work(eager, hidden)
    # slack: twice eager's own gap, 0.05 ms, and half the candidate's event time may separate the two clocks
    assert not benchmark._hidden_work(eager, {"median_latency_ms": 0.5, "median_host_ms": 0.5 + 0.2 + 0.05 + 0.25 - 1e-6})
    assert benchmark._hidden_work(eager, {"median_latency_ms": 0.5, "median_host_ms": 0.5 + 0.2 + 0.05 + 0.25 + 1e-3})


def test_the_flush_writes_more_than_four_times_the_largest_l2_cache():
    # the H200's L2 is 60 MB (the largest of the GPUs we time on); a smaller flush leaves part of a call's data warm
    assert benchmark.L2_FLUSH_BYTES >= 4 * 60 * 1000**2
