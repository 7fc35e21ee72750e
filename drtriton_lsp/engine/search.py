"""Test-time search (after DRTriton): each kernel of the default schedule is a fragment (a kept
convolution joins the pointwise kernel after it, a matmul kernel the reduce kernel after it, and
consecutive pointwise and reduce kernels over the same rows join each other); its alternatives are
verified on their own, timed against PyTorch, and the fastest verified one is kept. First, the default
schedule is measured whole against the same with its kept convolutions channels-last.

Budgeted in seconds (a hard limit: a fragment still being measured when they run out is stopped and keeps
its default) and candidates, cancellable (the best verified result so far is kept), reported as it goes, and
cached by task and environment so a repeated search is instant. The winner is always a schedule script, so it
can be reproduced and refined. With a measurer per GPU, fragments are measured side by side, one to a GPU.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time
import queue
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Protocol, Sequence

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.fragments import (
    SearchStep,
    UnsearchableFragment,
    channels_last_schedule,
    fragment_graph,
    fragment_task_source,
    schedulable_ops,
    search_steps,
    step_alternatives,
)
from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.compiler.script import KeepLine, KernelLine, Schedule, parse_schedule, print_schedule
from drtriton_lsp.engine.session import Cancelled, WorkerSession
from drtriton_lsp.engine.verify import user_input_shapes, verify_candidate, worker_environment
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.runner import JobFailure
from drtriton_lsp.source.candidate import build_candidate
from drtriton_lsp.task import Task

# 2: kept convolutions are searched (with the pointwise kernel after them); 3: a matmul kernel is
# searched with the reduce kernel after it (and folding it in); 4: consecutive pointwise and reduce
# kernels over the same rows are searched together (and as one row kernel); 5: large float32 matmuls
# are kept in cuBLAS by default (and searched as a fused matmul kernel); 6: kept 2-d convolutions are measured
# channels-last over the whole graph; 7: matmul lines carry `loads` (TMA descriptor loads are searched)
SEARCH_CACHE_VERSION = 7
# how often the search's deadline is checked while a fragment is being measured
DEADLINE_POLL_S = 0.05
# stopping the workers still measuring takes time, so the deadline fires this much early (at most 5 % of the budget):
# on the H200 a 5 s budget ended at 5.36-5.53 s without it
STOP_RESERVE_S = 0.5


@dataclass(frozen=True)
class SearchBudget:
    """How much a search may spend: wall seconds, candidates in all, and candidates per fragment; and the templates
    whose float32 products may be computed in TF32 (`tf32_templates`, from the user's settings: see `tf32_allowed`)."""

    seconds: float = 60.0
    candidates: int = 96
    per_fragment: int = 12
    tf32_templates: tuple[str, ...] = ()


def tf32_allowed(precision: dict[str, Any]) -> tuple[str, ...]:
    """The templates that may compute float32 in TF32 under the user's PyTorch settings (as the task's process has
    them after importing the user's module), the way PyTorch itself would: convolutions when
    `torch.backends.cudnn.allow_tf32` is on (PyTorch's default), matmuls when `torch.backends.cuda.matmul.allow_tf32`
    is on or `torch.get_float32_matmul_precision()` is not "highest" (off by default)."""
    templates = []
    if precision.get("cudnn_allow_tf32"):
        templates.append("conv")
    if precision.get("matmul_allow_tf32") or precision.get("float32_matmul_precision", "highest") != "highest":
        templates.append("matmul")
    return tuple(templates)


@dataclass
class Alternative:
    """One way to compute a fragment, and what measuring it showed (ms None: not timed)."""

    label: str
    script: str
    verified: bool = False
    reason: str = ""
    ms: float | None = None


@dataclass(frozen=True)
class WholeProgram:
    """The target itself, for the layout step: its task, and the written-back candidate of a schedule (the dispatch
    and its guards included), so both layouts are measured as the user's file will run them (a fragment task takes
    the weights as inputs and has no guards: on host-bound blocks its times were half the written-back module's)."""

    task: Task
    candidate: Callable[[str], str]


@dataclass
class FragmentResult:
    """The measured alternatives of one search step of the default schedule (a kernel line, or a kept
    op with the kernel line after it; `line` is its first line's number), and the one kept."""

    line: int
    ops: list[str]
    pytorch_ms: float | None
    alternatives: list[Alternative]
    chosen: str

    @property
    def best(self) -> Alternative:
        return next(alternative for alternative in self.alternatives if alternative.label == self.chosen)


@dataclass
class SearchResult:
    """The assembled schedule and how it was found."""

    schedule: str
    fragments: list[FragmentResult] = field(default_factory=list)
    candidates: int = 0
    verified: int = 0
    seconds: float = 0.0
    stopped: str = ""  # why the search ended early ("budget", "cancelled"), empty when complete
    cached: bool = False

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "SearchResult":
        fragments = [
            FragmentResult(**{**fragment, "alternatives": [Alternative(**a) for a in fragment["alternatives"]]})
            for fragment in data["fragments"]
        ]
        return cls(**{**data, "fragments": fragments})


class FragmentMeasurer(Protocol):
    """Verifies candidates for one fragment and times the verified ones and PyTorch's own kernels; stops its jobs
    and raises Cancelled as soon as `stop` is set (the search's deadline passed, or the user cancelled).

    Returns (PyTorch's time in ms or None, one (verified, reason, ms or None) per candidate).
    """

    def __call__(
        self, task: Task, fragment: OpGraph, candidates: list[str], stop: threading.Event
    ) -> tuple[float | None, list[tuple[bool, str, float | None]]]: ...


class Deadline:
    """An event set when a search's seconds run out or the user cancels, whichever comes first: the measurers'
    jobs watch it, so a fragment or an answer being measured when the budget ends is stopped, not waited for."""

    def __init__(self, seconds: float, cancel: threading.Event | None):
        self.stop = threading.Event()
        self._ends_at = time.monotonic() + seconds - min(STOP_RESERVE_S, 0.05 * seconds)
        self._cancel = cancel
        self._finished = threading.Event()
        self._watcher = threading.Thread(target=self._watch, name="drtriton-search-deadline", daemon=True)

    def _watch(self) -> None:
        while not self._finished.wait(DEADLINE_POLL_S):
            if time.monotonic() >= self._ends_at or (self._cancel is not None and self._cancel.is_set()):
                self.stop.set()
                return

    def expired(self) -> bool:
        return time.monotonic() >= self._ends_at

    def __enter__(self) -> "Deadline":
        self._watcher.start()
        return self

    def __exit__(self, *_exc) -> None:
        self._finished.set()
        self._watcher.join()


def choose(alternatives: list[Alternative]) -> Alternative:
    """The fastest verified, timed alternative; without timings, the first verified (the default)."""
    timed = [alternative for alternative in alternatives if alternative.verified and alternative.ms is not None]
    if timed:
        return min(timed, key=lambda alternative: alternative.ms)
    verified = [alternative for alternative in alternatives if alternative.verified]
    return verified[0] if verified else alternatives[0]


def assemble(base: Schedule, replacements: dict[int, str]) -> Schedule:
    """The base schedule with the steps at some positions replaced by other script text (its replay line kept)."""
    steps: list[KernelLine | KeepLine] = []
    for position, step in enumerate(base.steps):
        steps.extend(parse_schedule(replacements[position]).steps if position in replacements else (step,))
    return Schedule(tuple(steps), base.replay)


def search_schedule(
    graph: OpGraph,
    base: Schedule,
    *,
    name: str,
    measure: FragmentMeasurer,
    budget: SearchBudget,
    progress: Callable[[str], None] = lambda _message: None,
    cancel: threading.Event | None = None,
    whole: WholeProgram | None = None,
    more_measures: Sequence[FragmentMeasurer] = (),
) -> SearchResult:
    """Measure the alternatives of every kernel line of `base` and assemble the fastest verified ones.

    First the whole graph with its kept convolutions channels-last against `base` (the layout step), then (with
    `whole`) the written-back module with and without CUDA-graph replay (the replay step); then the lines in order, but for those of a convolution the layout step made channels-last. When the budget runs out or
    `cancel` is set, the line being measured is stopped and the lines not yet searched keep their default, so the
    result is always a complete, decodable schedule. whole: the target's own task for the layout step (else the
    graph as a fragment task). more_measures: measurers of other GPUs, on which later lines are measured side by side
    with `measure`'s (each fragment's alternatives all on one GPU, so they are compared on the same one).
    """
    started = time.monotonic()
    result = SearchResult(schedule=print_schedule(base))
    replacements: dict[int, str] = {}
    with Deadline(budget.seconds, cancel) as deadline:
        base, result.stopped = _layout_step(
            graph, base, name=name, measure=measure, budget=budget, progress=progress, cancel=cancel,
            deadline=deadline, result=result, whole=whole,
        )
        if not result.stopped and whole is not None:
            base, result.stopped = _replay_step(
                graph, base, measure=measure, budget=budget, progress=progress, cancel=cancel, deadline=deadline,
                result=result, whole=whole,
            )
        if not result.stopped:
            result.stopped = _search_steps(
                graph, base, name=name, measures=[measure, *more_measures], budget=budget, progress=progress, cancel=cancel,
                deadline=deadline, result=result, replacements=replacements,
            )
    result.schedule = print_schedule(assemble(base, replacements))
    result.seconds = round(time.monotonic() - started, 2)
    return result


class _Stopped(Exception):
    """Measuring stopped: the search's budget ran out ("budget") or it was cancelled ("cancelled")."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


def _fragment_sources(
    fragment: OpGraph, options: list[tuple[str, tuple[KernelLine | KeepLine, ...]]], task: Task, description: str
) -> list[str]:
    """Each option compiled for the fragment and built into a candidate of its task."""
    forward_params = [graph_input.target for graph_input in fragment.inputs]
    sources = []
    for label, lines in options:
        program = compile_graph(
            fragment, prefix=task.name, forward_params=forward_params, has_self=True, schedule=print_schedule(Schedule(lines))
        )
        sources.append(build_candidate(task.source, program, f"Search candidate '{label}' for {description}."))
    return sources


def _measure_options(
    graph: OpGraph, options: list[tuple[str, tuple[KernelLine | KeepLine, ...]]], sources: list[str], *, task: Task,
    measure: FragmentMeasurer, budget: SearchBudget, cancel: threading.Event | None, deadline: Deadline,
    progress: Callable[[str], None], what: str,
) -> tuple[float | None, list[Alternative]]:
    """Verify and time each option's candidate source in `task` (over `graph`); (PyTorch's ms, the options as
    alternatives).

    Raises _Stopped when the budget runs out or the search is cancelled, DrtritonError when the task cannot run.
    """
    progress(f"{what}: measuring {len(options)} candidates")
    try:
        pytorch_ms, outcomes = measure(task, graph, sources, deadline.stop)
    except Cancelled:
        if (cancel is not None and cancel.is_set()) or not deadline.expired():
            raise _Stopped("cancelled") from None
        progress(f"{what}: the search's {budget.seconds:g} s ran out while measuring it")
        raise _Stopped("budget") from None
    alternatives = [
        Alternative(label, print_schedule(Schedule(lines)), verified, reason, ms)
        for (label, lines), (verified, reason, ms) in zip(options, outcomes)
    ]
    return pytorch_ms, alternatives


def _layout_step(
    graph: OpGraph, schedule: Schedule, *, name: str, measure: FragmentMeasurer, budget: SearchBudget,
    progress: Callable[[str], None], cancel: threading.Event | None, deadline: Deadline, result: SearchResult,
    whole: WholeProgram | None,
) -> tuple[Schedule, str]:
    """`schedule` against the same with its kept convolutions channels-last, both measured on the whole graph (the
    layout pays where kernels and later convolutions read it, which no one fragment shows); the faster verified one,
    and why the search stopped here ("" if it did not)."""
    relaid = channels_last_schedule(graph, schedule)
    if relaid is None:
        return schedule, ""
    if deadline.expired():
        return schedule, "budget"
    if budget.candidates - result.candidates < 2:
        return schedule, ""  # too few candidates for both layouts: the kernel lines take what there is
    options = [("default", schedule.steps), ("channels_last", relaid.steps)]
    try:
        if whole is not None:
            task, measured_graph = whole.task, graph
            sources = [whole.candidate(print_schedule(Schedule(lines))) for _, lines in options]
        else:
            measured_graph = fragment_graph(graph, schedulable_ops(graph))
            description = f"{name}, every op, its convolutions in either memory layout"
            task = Task(name=f"{name}_layouts", kind="module", source=fragment_task_source(measured_graph, description))
            sources = _fragment_sources(measured_graph, options, task, description)
    except UnsearchableFragment as why:
        progress(f"layouts: not searched, {why.message}")
        return schedule, ""
    pytorch_ms, alternatives, stopped = _whole_step(
        measured_graph, options, sources, task=task, measure=measure, budget=budget, cancel=cancel, deadline=deadline,
        progress=progress, what="layouts", result=result,
    )  # fmt: skip
    if alternatives is None:
        return schedule, stopped
    best = choose(alternatives)
    convolutions = [line.node for line in relaid.steps if isinstance(line, KeepLine) and line.layout]
    first_line = next(position for position, line in enumerate(relaid.steps) if isinstance(line, KeepLine) and line.layout)
    result.fragments.append(FragmentResult(first_line + 1, convolutions, pytorch_ms, alternatives, best.label))
    timing = f", {best.ms:.4g} ms vs PyTorch {pytorch_ms:.4g} ms" if best.ms and pytorch_ms else ""
    progress(f"layouts: best '{best.label}'{timing}")
    return (relaid if best.label == "channels_last" else schedule), ""


def _whole_step(
    graph: OpGraph, options: list[tuple[str, tuple[KernelLine | KeepLine, ...]]], sources: list[str], *, task: Task,
    measure: FragmentMeasurer, budget: SearchBudget, cancel: threading.Event | None, deadline: Deadline,
    progress: Callable[[str], None], what: str, result: SearchResult,
) -> tuple[float | None, list[Alternative] | None, str]:
    """A step measuring the whole graph's options (layouts, replay): (PyTorch's ms, the alternatives, counted into
    `result`; None where measuring stopped or the task cannot run, with why the search stopped: "" if it goes on)."""
    try:
        pytorch_ms, alternatives = _measure_options(
            graph, options, sources, task=task, measure=measure, budget=budget, cancel=cancel, deadline=deadline,
            progress=progress, what=what,
        )  # fmt: skip
    except _Stopped as stopped:
        return None, None, stopped.reason
    except DrtritonError as failure:
        progress(f"{what}: not searched, {failure.message}")
        return None, None, ""
    result.candidates += len(alternatives)
    result.verified += sum(alternative.verified for alternative in alternatives)
    return pytorch_ms, alternatives, ""


def _replay_step(
    graph: OpGraph, schedule: Schedule, *, measure: FragmentMeasurer, budget: SearchBudget, progress: Callable[[str], None],
    cancel: threading.Event | None, deadline: Deadline, result: SearchResult, whole: WholeProgram,
) -> tuple[Schedule, str]:
    """The written-back module with its forward run plainly against the same replayed as CUDA graphs (what a
    replay saves is host time, which only the whole module shows); the faster verified one, and why the search
    stopped here ("" if it did not)."""
    if deadline.expired():
        return schedule, "budget"
    if budget.candidates - result.candidates < 2:
        return schedule, ""
    options = [("plain", Schedule(schedule.steps)), ("cuda_graph", Schedule(schedule.steps, replay=True))]
    sources = [whole.candidate(print_schedule(option)) for _, option in options]
    pytorch_ms, alternatives, stopped = _whole_step(
        graph, [(label, option.steps) for label, option in options], sources, task=whole.task, measure=measure,
        budget=budget, cancel=cancel, deadline=deadline, progress=progress, what="replay", result=result,
    )  # fmt: skip
    if alternatives is None:
        return schedule, stopped
    for alternative, (_, option) in zip(alternatives, options):
        alternative.script = print_schedule(option)
    best = choose(alternatives)
    result.fragments.append(FragmentResult(len(schedule.steps) + 1, ["replay"], pytorch_ms, alternatives, best.label))
    timing = f", {best.ms:.4g} ms vs PyTorch {pytorch_ms:.4g} ms" if best.ms and pytorch_ms else ""
    progress(f"replay: best '{best.label}'{timing}")
    return Schedule(schedule.steps, replay=best.label == "cuda_graph"), ""


class _StepsInFlight:
    """What the steps measured side by side share: the candidates taken from the budget, those measured and verified
    so far (for progress), why measuring stopped, and each step's outcome (folded into the result in the steps' order
    at the end)."""

    def __init__(self, result: SearchResult):
        self.lock = threading.Lock()
        self.taken = self.tried = result.candidates
        self.verified = result.verified
        self.stopped = ""
        self.measured: dict[int, tuple[SearchStep, FragmentResult]] = {}

    def stop(self, reason: str) -> None:
        with self.lock:
            self.stopped = self.stopped or reason


def _search_steps(
    graph: OpGraph, base: Schedule, *, name: str, measures: Sequence[FragmentMeasurer], budget: SearchBudget,
    progress: Callable[[str], None], cancel: threading.Event | None, deadline: Deadline, result: SearchResult,
    replacements: dict[int, str],
) -> str:
    """Measure the steps into `result` and `replacements`, each on the first free measurer (one per GPU, so fragments
    are measured side by side, in order); returns why it stopped early ("" if it did not)."""
    steps = search_steps(graph, base)
    free: queue.Queue[FragmentMeasurer] = queue.Queue()
    for measure in measures:
        free.put(measure)
    shared = _StepsInFlight(result)
    running: list[Future] = []
    with ThreadPoolExecutor(max_workers=len(measures), thread_name_prefix="drtriton-fragment") as pool:
        for number, step in enumerate(steps, start=1):
            measure = free.get()  # waits while every measurer is busy
            if shared.stopped:
                break
            if cancel is not None and cancel.is_set():
                shared.stop("cancelled")
                break
            what = f"fragment {number}/{len(steps)} ({','.join(step.nodes)})"
            if any(isinstance(line, KeepLine) and line.layout for line in step.lines):
                # measured alone its input would be converted each time: the layout step measured it in place instead
                progress(f"{what}: kept channels-last (the layout step)")
                free.put(measure)
                continue
            remaining = budget.candidates - shared.taken
            if deadline.expired() or remaining <= 0:
                shared.stop("budget")
                break
            try:
                options = step_alternatives(graph, step, tf32_templates=budget.tf32_templates)
                fragment = fragment_graph(graph, step.nodes)
            except UnsearchableFragment as why:
                progress(f"{what}: not searched, {why.message}")
                free.put(measure)
                continue
            options = options[: min(budget.per_fragment, remaining)]
            with shared.lock:
                shared.taken += len(options)
            running.append(pool.submit(
                _measure_step, step, number, fragment, options, name=name, what=what, measure=measure,
                budget=budget, cancel=cancel, deadline=deadline, progress=progress, shared=shared, free=free,
                total=len(steps),
            ))  # fmt: skip
    for finished in running:
        finished.result()  # a measurer's own bug is raised here, not lost in its thread
    for number in sorted(shared.measured):
        step, fragment_result = shared.measured[number]
        result.fragments.append(fragment_result)
        result.candidates += len(fragment_result.alternatives)
        result.verified += sum(alternative.verified for alternative in fragment_result.alternatives)
        # the chosen lines take the step's last line's place (a kept op measured with the kernel after it moves there)
        replacements.update({position: "" for position in step.positions[:-1]})
        replacements[step.positions[-1]] = fragment_result.best.script
    return shared.stopped


def _measure_step(
    step: SearchStep, number: int, fragment: OpGraph, options: list[tuple[str, tuple[KernelLine | KeepLine, ...]]], *,
    name: str, what: str, measure: FragmentMeasurer, budget: SearchBudget, cancel: threading.Event | None,
    deadline: Deadline, progress: Callable[[str], None], shared: _StepsInFlight, free: queue.Queue, total: int,
) -> None:
    """Measure one step's options with `measure` into `shared`, then give the measurer back to `free`."""
    try:
        description = f"{name}, ops {','.join(step.nodes)}"
        task = Task(name=f"{name}_fragment_{number}", kind="module", source=fragment_task_source(fragment, description))
        try:
            pytorch_ms, alternatives = _measure_options(
                fragment, options, _fragment_sources(fragment, options, task, description), task=task,
                measure=measure, budget=budget, cancel=cancel, deadline=deadline, progress=progress, what=what,
            )  # fmt: skip
        except _Stopped as stopped:
            shared.stop(stopped.reason)
            return
        except DrtritonError as failure:  # this fragment's task could not run: it keeps its default, the rest go on
            with shared.lock:
                shared.taken -= len(options)
            progress(f"{what}: not searched, {failure.message}")
            return
        # PyTorch's own kernels for the fragment are exact by construction: measured, not verified
        for alternative in alternatives:
            if alternative.label == "pytorch":
                alternative.verified, alternative.ms = True, pytorch_ms
        best = choose(alternatives)
        measured = FragmentResult(step.positions[0] + 1, list(step.nodes), pytorch_ms, alternatives, best.label)
        with shared.lock:
            shared.measured[number] = (step, measured)
            shared.tried += len(alternatives)
            shared.verified += sum(alternative.verified for alternative in alternatives)
            tried, verified = shared.tried, shared.verified
        timing = f", {best.ms:.4g} ms vs PyTorch {pytorch_ms:.4g} ms" if best.ms and pytorch_ms else ""
        progress(
            f"fragment {number}/{total}: best '{best.label}'{timing}; {tried} candidates tried, {verified} verified"
        )
    finally:
        free.put(measure)


class SearchCache:
    """Search results on disk, keyed by the task, the graph, the environment and the budget."""

    def __init__(self, directory: Path):
        self.directory = directory

    @staticmethod
    def key(task_source: str, graph: OpGraph, environment: dict[str, Any], budget: SearchBudget) -> str:
        material = json.dumps(
            {
                "version": SEARCH_CACHE_VERSION,
                "task": task_source,
                "graph": graph.to_json(),
                "environment": environment,
                "budget": asdict(budget),
            },
            sort_keys=True,
        )
        return hashlib.sha256(material.encode()).hexdigest()

    def load(self, key: str) -> SearchResult | None:
        path = self.directory / f"{key}.json"
        try:
            result = SearchResult.from_json(json.loads(path.read_text()))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        result.cached = True
        return result

    def store(self, key: str, result: SearchResult) -> None:
        if result.stopped:
            return  # an interrupted search is not the answer to this key
        self.directory.mkdir(parents=True, exist_ok=True)
        temporary = self.directory / f".{key}.tmp"
        temporary.write_text(json.dumps(result.to_json(), indent=1))
        temporary.replace(self.directory / f"{key}.json")


def default_cache_directory() -> Path:
    return Path.home() / ".cache" / "drtriton" / "search"


class GpuLock:
    """Verification jobs share the GPU with each other; a timing job has it alone."""

    def __init__(self) -> None:
        self._condition = threading.Condition()
        self._sharing = 0
        self._timing = False

    def shared(self):
        return _Hold(self, exclusive=False)

    def exclusive(self):
        return _Hold(self, exclusive=True)


class _Hold:
    def __init__(self, lock: GpuLock, exclusive: bool):
        self.lock, self.is_exclusive = lock, exclusive

    def __enter__(self) -> None:
        with self.lock._condition:
            if self.is_exclusive:
                self.lock._condition.wait_for(lambda: not self.lock._timing and self.lock._sharing == 0)
                self.lock._timing = True
            else:
                self.lock._condition.wait_for(lambda: not self.lock._timing)
                self.lock._sharing += 1

    def __exit__(self, *_exc) -> None:
        with self.lock._condition:
            if self.is_exclusive:
                self.lock._timing = False
            else:
                self.lock._sharing -= 1
            self.lock._condition.notify_all()


class WorkerMeasurer:
    """Measures fragments with worker processes: verifications in parallel (one worker each),
    then one timing job for the verified candidates and PyTorch, alone on the GPU (the session's verify and
    benchmark limits)."""

    def __init__(self, session: WorkerSession, *, device: str, trials: int, parallel: int):
        self.session, self.device, self.trials = session, device, trials
        self.parallel = max(1, parallel)
        self.gpu = GpuLock()

    def __call__(self, task: Task, fragment: OpGraph, candidates: list[str], stop: threading.Event):
        session = self.session.side_jobs(stop)

        def verify_one(source: str):
            with self.gpu.shared():
                # each verification starts the next one's worker (or the timing job's: the same environment on a GPU)
                verdict = verify_candidate(
                    task, source, session=session, device=self.device, trials=self.trials,
                    input_shapes=user_input_shapes(fragment), prepare_next=worker_environment(self.device),
                )
            return verdict.verified, "" if verdict.verified else verdict.explanation

        with ThreadPoolExecutor(max_workers=self.parallel) as pool:
            verdicts = list(pool.map(verify_one, candidates))
        verified_sources = [source for source, (ok, _) in zip(candidates, verdicts) if ok]
        if self.device == "cpu" or not verified_sources:
            return None, [(ok, reason, None) for ok, reason in verdicts]
        with self.gpu.exclusive():
            try:
                timing = session.call(
                    "time_candidates",
                    {"task": task.to_json(), "candidates": verified_sources},
                    limits=session.limits.benchmark,
                    env={"TRITON_INTERPRET": None},
                )
            except JobFailure as failure:
                if failure.reason == "cancelled":
                    raise Cancelled() from failure
                if failure.runner_fault:
                    raise DrtritonError(f"the timing worker failed: {failure.detail}", failure.hint) from failure
                # verified but untimed: the fragment keeps its default
                return None, [(ok, reason, None) for ok, reason in verdicts]
        times = iter(timing["candidate_ms"])
        return timing["reference_ms"], [(ok, reason, next(times) if ok else None) for ok, reason in verdicts]
