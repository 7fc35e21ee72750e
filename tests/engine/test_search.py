"""Test-time search logic on the CPU: fragments and their alternatives, choosing, budgets,
cancellation, the cache, and the GPU lock. Timings come from a stand-in measurer here.

The real measurer (worker processes) is exercised at the end under Triton's interpreter.
"""

from __future__ import annotations

import threading
import time
import warnings

import pytest
import torch
from torch import nn

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.fragments import fragment_graph, fragment_task_source, line_alternatives, search_steps
from drtriton_lsp.compiler.planner import default_schedule
from drtriton_lsp.compiler.script import KernelLine, parse_schedule, print_schedule
from drtriton_lsp.engine.search import (
    DEADLINE_POLL_S,
    Alternative,
    GpuLock,
    SearchBudget,
    SearchCache,
    SearchResult,
    WholeProgram,
    WorkerMeasurer,
    choose,
    search_schedule,
)
from drtriton_lsp.engine.gpu_memory import GpuMemory
from drtriton_lsp.engine.session import Cancelled, WorkerLimits, WorkerSession
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.local import JobLimits, LocalRunner
from drtriton_lsp.runners.protocol import GPU_LOCK_VARIABLE
from drtriton_lsp.runners.ssh import RemoteHost, SshRunner
from drtriton_lsp.task import Task, load_module_from_source
from drtriton_lsp.worker.capture import capture_graph


class TwoChains(nn.Module):
    """Two elementwise chains around a flip, which stays in PyTorch: two kernels to search."""

    def forward(self, x):
        scaled = torch.sigmoid(x) * 3.0
        flipped = scaled.flip(0)
        return torch.tanh(flipped) + 1.0


@pytest.fixture(scope="module")
def graph():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return capture_graph(TwoChains().eval(), (torch.randn(6, 10),))


def kernel_lines(graph) -> list[KernelLine]:
    return list(default_schedule(graph).kernels)


def test_each_kernel_line_is_a_fragment_that_runs_alone_like_the_graph(graph, tmp_path):
    first = kernel_lines(graph)[0]
    fragment = fragment_graph(graph, first.nodes)
    assert [node.name for node in fragment.nodes] == list(first.nodes)
    assert [graph_input.name for graph_input in fragment.inputs] == ["x"]
    module = load_module_from_source(fragment_task_source(fragment, "test"), "fragment_task", tmp_path)
    (x,) = module.get_inputs()
    torch.testing.assert_close(module.Model()(x), torch.sigmoid(x) * 3.0)


def test_alternatives_cover_parameters_pytorch_and_all_decode(graph):
    line = kernel_lines(graph)[0]
    alternatives = dict(line_alternatives(graph, line))
    assert alternatives["default"] == (line,)
    assert "pytorch" in alternatives and "block=2048" in alternatives and "warps=8" in alternatives
    for lines in alternatives.values():
        script = "".join(step.render() + "\n" for step in lines)
        fragment = fragment_graph(graph, line.nodes)
        compile_graph(fragment, prefix="check", forward_params=["x"], has_self=True, schedule=script)


def fake_measurer(times: dict[str, float], rejected: set[str] = frozenset(), pytorch_ms: float = 1.0):
    """Stand-in for the GPU: a candidate's time is looked up by a word of its schedule."""
    calls = []

    def measure(task: Task, fragment, candidates, stop):
        calls.append(len(candidates))
        outcomes = []
        for source in candidates:
            label = next((word for word in times if word in source), None)
            verified = label not in rejected
            outcomes.append((verified, "" if verified else "wrong_result", times.get(label, 2.0) if verified else None))
        return pytorch_ms, outcomes

    measure.calls = calls
    return measure


def test_the_fastest_verified_alternative_wins_and_an_unverified_one_never_does(graph):
    base = default_schedule(graph)
    measure = fake_measurer({"BLOCK = 4096": 0.1, "BLOCK = 2048": 0.5}, rejected={"BLOCK = 4096"})
    result = search_schedule(graph, base, name="two_chains", measure=measure, budget=SearchBudget())
    assert [fragment.chosen for fragment in result.fragments] == ["block=2048", "block=2048"]
    assert result.schedule.count("block=2048") == 2 and "block=4096" not in result.schedule
    assert result.verified < result.candidates and not result.stopped
    compile_graph(graph, prefix="t", forward_params=["x"], has_self=True, schedule=result.schedule)


def test_pytorch_wins_when_its_kernels_are_faster(graph):
    result = search_schedule(
        graph, default_schedule(graph), name="t", measure=fake_measurer({}, pytorch_ms=0.01), budget=SearchBudget()
    )
    assert all(fragment.chosen == "pytorch" for fragment in result.fragments)
    assert "kernel" not in result.schedule
    program = compile_graph(graph, prefix="t", forward_params=["x"], has_self=True, schedule=result.schedule)
    assert not program.kernels


@pytest.mark.parametrize(("replayed_ms", "chosen"), [(0.3, "cuda_graph"), (0.9, "plain")])
def test_with_the_target_module_the_search_measures_replay_first_and_keeps_the_faster(graph, replayed_ms, chosen):
    """The written-back module itself, run plainly and replayed as CUDA graphs (what replay saves is host time, which
    no fragment shows); the kernel lines are searched after it, on fragments."""
    target = Task(name="two_chains", kind="module", source="# the user's file\n")
    asked: list[tuple[str, list[str]]] = []

    def measure(task, fragment, candidates, stop):
        asked.append((task.name, candidates))
        return 1.0, [(True, "", replayed_ms if "replay cuda_graph" in source else 0.5) for source in candidates]

    written = WholeProgram(target, lambda schedule: f"# written back\n{schedule}")
    base = default_schedule(graph)
    result = search_schedule(graph, base, name="two_chains", measure=measure, budget=SearchBudget(), whole=written)
    assert asked[0][0] == "two_chains" and ["replay cuda_graph" in source for source in asked[0][1]] == [False, True]
    assert result.fragments[0].ops == ["replay"] and result.fragments[0].chosen == chosen
    assert result.fragments[0].line == len(base.steps) + 1
    assert parse_schedule(result.schedule).replay == (chosen == "cuda_graph")
    assert all(name != "two_chains" for name, _ in asked[1:])


def test_choose_falls_back_to_the_default_without_timings():
    alternatives = [Alternative("default", "a", verified=True), Alternative("block=256", "b", verified=True)]
    assert choose(alternatives).label == "default"
    assert choose([Alternative("default", "a"), Alternative("x", "b", verified=True)]).label == "x"


def test_a_candidate_budget_stops_the_search_with_a_complete_schedule(graph):
    base = default_schedule(graph)
    per_fragment = len(line_alternatives(graph, kernel_lines(graph)[0]))
    measure = fake_measurer({"BLOCK = 2048": 0.5})
    result = search_schedule(graph, base, name="t", measure=measure, budget=SearchBudget(candidates=per_fragment))
    assert result.stopped == "budget" and len(result.fragments) == 1
    assert result.schedule.count("block=2048") == 1 and result.schedule.count("block=1024") == 1
    parse_schedule(result.schedule)


def test_cancelling_keeps_what_was_found(graph):
    cancel = threading.Event()
    inner = fake_measurer({"BLOCK = 2048": 0.5})

    def measure_then_cancel(task, fragment, candidates, stop):
        cancel.set()
        return inner(task, fragment, candidates, stop)

    result = search_schedule(
        graph, default_schedule(graph), name="t", measure=measure_then_cancel, budget=SearchBudget(), cancel=cancel
    )
    assert result.stopped == "cancelled" and len(result.fragments) == 1

    def cancelled_midway(task, fragment, candidates, stop):
        raise Cancelled()

    result = search_schedule(graph, default_schedule(graph), name="t", measure=cancelled_midway, budget=SearchBudget())
    assert result.stopped == "cancelled" and result.schedule == print_schedule(default_schedule(graph))


def measure_until_stopped(task, fragment, candidates, stop):
    """A fragment that takes far longer than any budget: it ends only when the search stops it."""
    if not stop.wait(timeout=60):
        raise AssertionError("the search never stopped the fragment being measured")
    raise Cancelled()


def test_the_seconds_budget_stops_the_fragment_being_measured_and_keeps_the_default(graph):
    messages: list[str] = []
    started = time.monotonic()
    result = search_schedule(
        graph, default_schedule(graph), name="t", measure=measure_until_stopped, budget=SearchBudget(seconds=0.3),
        progress=messages.append,
    )
    elapsed = time.monotonic() - started
    assert 0.3 * 0.95 <= elapsed < 0.3 * 1.1 + 0.1  # the budget less its stop reserve, plus the deadline's polling
    assert result.stopped == "budget" and result.fragments == []
    assert result.schedule == print_schedule(default_schedule(graph))
    assert any("0.3 s ran out while measuring it" in message for message in messages)


def test_the_deadline_leaves_time_to_stop_the_workers_so_the_budget_holds(graph):
    """Stopping a measurement takes time (killing its worker processes); the deadline fires early enough for that."""

    def slow_to_stop(task, fragment, candidates, stop):
        if not stop.wait(timeout=60):
            raise AssertionError("the search never stopped the fragment being measured")
        time.sleep(0.09)  # what killing and reaping a fragment's workers costs
        raise Cancelled()

    started = time.monotonic()
    result = search_schedule(
        graph, default_schedule(graph), name="t", measure=slow_to_stop, budget=SearchBudget(seconds=2.0)
    )
    assert time.monotonic() - started < 2.0 + DEADLINE_POLL_S
    assert result.stopped == "budget"


def test_a_cancel_while_a_fragment_is_measured_stops_it_at_once_and_says_cancelled(graph):
    cancel = threading.Event()
    threading.Timer(0.2, cancel.set).start()
    started = time.monotonic()
    result = search_schedule(
        graph, default_schedule(graph), name="t", measure=measure_until_stopped, budget=SearchBudget(seconds=60),
        cancel=cancel,
    )
    assert time.monotonic() - started < 1.0
    assert result.stopped == "cancelled" and result.schedule == print_schedule(default_schedule(graph))


def test_fragments_measured_before_the_deadline_are_kept(graph):
    inner = fake_measurer({"BLOCK = 2048": 0.5})
    measured: list[str] = []

    def first_fast_then_slow(task, fragment, candidates, stop):
        if measured:
            return measure_until_stopped(task, fragment, candidates, stop)
        measured.append(task.name)
        return inner(task, fragment, candidates, stop)

    result = search_schedule(
        graph, default_schedule(graph), name="t", measure=first_fast_then_slow, budget=SearchBudget(seconds=0.5)
    )
    assert result.stopped == "budget" and len(result.fragments) == 1
    assert result.schedule.count("block=2048") == 1 and result.schedule.count("block=1024") == 1


def test_a_fragment_whose_task_cannot_run_keeps_its_default_and_the_search_goes_on(graph):
    inner = fake_measurer({"BLOCK = 2048": 0.5})
    seen: list[str] = []

    def first_fragment_fails(task, fragment, candidates, stop):
        if not seen:
            seen.append(task.name)
            raise DrtritonError("TypeError while drawing example inputs: ...", "fix the code")
        return inner(task, fragment, candidates, stop)

    messages: list[str] = []
    base = default_schedule(graph)
    result = search_schedule(
        graph, base, name="t", measure=first_fragment_fails, budget=SearchBudget(), progress=messages.append
    )
    assert result.stopped == "" and len(result.fragments) == len(search_steps(graph, base)) - 1
    assert any("not searched, TypeError while drawing example inputs" in message for message in messages)


def test_fragments_are_measured_side_by_side_on_several_gpus_and_assembled_as_on_one(graph):
    base = default_schedule(graph)
    times = {"BLOCK = 4096": 0.1, "BLOCK = 2048": 0.5}
    alone = search_schedule(graph, base, name="t", measure=fake_measurer(times), budget=SearchBudget())
    both_started = threading.Barrier(2, timeout=10)  # passes only when two fragments are measured at once
    measured_on: dict[str, str] = {}

    def on_gpu(gpu: str):
        inner = fake_measurer(times)

        def measure(task, fragment, candidates, stop):
            measured_on[task.name] = gpu
            both_started.wait()
            return inner(task, fragment, candidates, stop)

        return measure

    side_by_side = search_schedule(
        graph, base, name="t", measure=on_gpu("0"), more_measures=[on_gpu("1")], budget=SearchBudget()
    )
    assert sorted(measured_on.values()) == ["0", "1"] and len(measured_on) == len(search_steps(graph, base))
    assert side_by_side.schedule == alone.schedule and not side_by_side.stopped
    assert [f.line for f in side_by_side.fragments] == [f.line for f in alone.fragments]
    assert (side_by_side.candidates, side_by_side.verified) == (alone.candidates, alone.verified)


def test_the_candidate_budget_holds_across_gpus(graph):
    per_fragment = len(line_alternatives(graph, kernel_lines(graph)[0]))
    first, second = fake_measurer({"BLOCK = 2048": 0.5}), fake_measurer({"BLOCK = 2048": 0.5})
    result = search_schedule(
        graph, default_schedule(graph), name="t", measure=first, more_measures=[second],
        budget=SearchBudget(candidates=per_fragment),
    )
    assert result.stopped == "budget" and len(result.fragments) == 1 and result.candidates == per_fragment
    assert len(first.calls) + len(second.calls) == 1


def test_the_seconds_budget_stops_the_fragments_measured_on_every_gpu(graph):
    stopped_on: list[str] = []

    def until_stopped(gpu: str):
        def measure(task, fragment, candidates, stop):
            try:
                return measure_until_stopped(task, fragment, candidates, stop)
            finally:
                stopped_on.append(gpu)

        return measure

    started = time.monotonic()
    result = search_schedule(
        graph, default_schedule(graph), name="t", measure=until_stopped("0"), more_measures=[until_stopped("1")],
        budget=SearchBudget(seconds=0.4),
    )
    assert time.monotonic() - started < 0.4 * 1.1 + 0.1
    assert sorted(stopped_on) == ["0", "1"]  # both GPUs had a fragment when the budget ran out
    assert result.stopped == "budget" and result.fragments == []
    assert result.schedule == print_schedule(default_schedule(graph))


def test_a_measurer_that_breaks_is_an_error_not_a_silent_default(graph):
    def broken(task, fragment, candidates, stop):
        raise ZeroDivisionError("a bug in the measurer")

    with pytest.raises(ZeroDivisionError):
        search_schedule(
            graph, default_schedule(graph), name="t", measure=broken, more_measures=[broken], budget=SearchBudget()
        )


def test_a_search_on_several_gpus_gives_each_gpu_its_own_workers_lock_and_room(monkeypatch):
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "2,5,7")
    session = WorkerSession(LocalRunner(extra_env={"KEPT": "1"}), gpu_memory=GpuMemory(80 * 2**30), gpu_bytes=10)
    with session.on_each_gpu(2) as sessions:
        environments = [gpu_session.runner.extra_env for gpu_session in sessions]
        assert [environment["CUDA_VISIBLE_DEVICES"] for environment in environments] == ["2", "5"]
        assert all(environment["KEPT"] == "1" for environment in environments)
        assert len({environment[GPU_LOCK_VARIABLE] for environment in environments}) == 2
        assert sessions[0].gpu_memory is not sessions[1].gpu_memory
        assert {gpu_session.gpu_memory.total_bytes for gpu_session in sessions} == {80 * 2**30}
        assert [gpu_session.gpu_bytes for gpu_session in sessions] == [10, 10]
    with session.on_each_gpu(1) as sessions:
        assert sessions == [session]
    remote = WorkerSession(SshRunner(remote=RemoteHost.parse("ssh://gpu-box")))
    with pytest.raises(DrtritonError, match="workers run on ssh://gpu-box"):
        with remote.on_each_gpu(2):
            pass


class ScalarAndMatrix(nn.Module):
    def forward(self, scale, x):
        return torch.tanh(scale) * torch.sigmoid(x)


@pytest.mark.parametrize("shape", [(), (5,), (3, 4)], ids=["0-d", "1-d", "2-d"])
def test_a_fragment_task_draws_inputs_of_every_rank(shape, tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        captured = capture_graph(ScalarAndMatrix().eval(), (torch.randn(()), torch.randn(shape)))
    fragment = fragment_graph(captured, [captured.nodes[0].name])
    module = load_module_from_source(fragment_task_source(fragment, "test"), f"fragment_{len(shape)}", tmp_path)
    (scale,) = module.get_inputs()
    assert scale.shape == ()


def test_the_cache_returns_a_finished_search_for_the_same_task_and_environment(graph, tmp_path):
    cache = SearchCache(tmp_path)
    result = search_schedule(
        graph, default_schedule(graph), name="t", measure=fake_measurer({"BLOCK = 2048": 0.5}), budget=SearchBudget()
    )
    environment = {"device": "NVIDIA H200", "torch": "2.11.0", "triton": "3.6.0"}
    key = cache.key("task source", graph, environment, SearchBudget())
    assert cache.load(key) is None
    cache.store(key, result)
    loaded = cache.load(key)
    assert loaded.cached and loaded.schedule == result.schedule
    assert [fragment.chosen for fragment in loaded.fragments] == [fragment.chosen for fragment in result.fragments]
    other_gpu = cache.key("task source", graph, {**environment, "device": "NVIDIA A100"}, SearchBudget())
    assert other_gpu != key and cache.load(other_gpu) is None
    interrupted = SearchResult(schedule=result.schedule, stopped="budget")
    cache.store(other_gpu, interrupted)
    assert cache.load(other_gpu) is None


def test_a_timing_waits_until_no_verification_uses_the_gpu():
    lock = GpuLock()
    events: list[str] = []
    verifying = threading.Event()

    def verification():
        with lock.shared():
            events.append("verify start")
            verifying.set()
            time.sleep(0.2)
            events.append("verify end")

    def timing():
        verifying.wait(timeout=10)
        with lock.exclusive():
            events.append("timing")

    threads = [threading.Thread(target=verification), threading.Thread(target=timing)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert events == ["verify start", "verify end", "timing"]


class FirstFragment:
    """The graph's first kernel line as a fragment task, a worker measurer on the CPU, and the compiler's candidate."""

    def __init__(self, graph):
        from drtriton_lsp.source.candidate import build_candidate

        self.fragment = fragment_graph(graph, kernel_lines(graph)[0].nodes)
        self.task = Task(name="fragment", kind="module", source=fragment_task_source(self.fragment, "test"))
        limits = WorkerLimits(verify=JobLimits(timeout_s=300), benchmark=JobLimits(timeout_s=300))
        self.measurer = WorkerMeasurer(WorkerSession(LocalRunner(), limits=limits), device="cpu", trials=1, parallel=2)
        program = compile_graph(self.fragment, prefix="f", forward_params=["x"], has_self=True)
        self.candidate = build_candidate(self.task.source, program, "the compiler's")

    def measure(self, candidates: list[str], stop: threading.Event):
        return self.measurer(self.task, self.fragment, candidates, stop)


@pytest.mark.slow
def test_the_worker_measurer_verifies_fragment_candidates_under_the_interpreter(graph):
    first = FirstFragment(graph)
    wrong = first.candidate.replace("* 3.0", "* 3.5")
    pytorch_ms, outcomes = first.measure([first.candidate, wrong], threading.Event())
    assert pytorch_ms is None  # nothing is timed on the CPU
    assert outcomes[0] == (True, "", None)
    assert outcomes[1][0] is False and "differ from the reference" in outcomes[1][1]


@pytest.mark.slow
def test_the_worker_measurer_stops_its_verification_workers_when_told(graph):
    first = FirstFragment(graph)
    stop = threading.Event()
    threading.Timer(1.0, stop.set).start()  # a verification under the interpreter takes several seconds
    started = time.monotonic()
    with pytest.raises(Cancelled):
        first.measure([first.candidate, first.candidate], stop)
    assert time.monotonic() - started < 5.0
