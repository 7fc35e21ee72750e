"""Model-driven search: a model's answers (untrusted code) judged by the same verifier and benchmark as the compiler's
candidate, refined over turns; a model that fails or is cancelled ends only its own part of the job.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from drtriton_lsp.compiler.codegen import CompiledProgram, compile_graph
from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.compiler.planner import with_default_replay
from drtriton_lsp.engine.report import MODEL_MORE_TIME, ModelSearchEntry
from drtriton_lsp.engine.search import Deadline
from drtriton_lsp.engine.session import Cancelled, WorkerSession
from drtriton_lsp.engine.verify import verify_candidate, worker_environment
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.models import formats
from drtriton_lsp.models.backends import ModelBackend, ModelUnavailable, Sampling, SamplingCancelled
from drtriton_lsp.models.script_grammar import ScriptConstraint, script_constraint
from drtriton_lsp.models.settings import ModelSettings
from drtriton_lsp.models.sources import MODEL, Origin
from drtriton_lsp.runners.local import JobFailure
from drtriton_lsp.source.writeback import verification_candidate
from drtriton_lsp.task import Task

# How many distinct rejection reasons the report lists (the rest are counted).
REPORTED_REASONS = 5
REASON_CHARS = 300
MAX_TOKENS = {"kernel": 2048, "script": 512}


@dataclass
class ModelCandidate:
    """One model answer and what became of it.

    answer: what the model wrote (read up to its end line), shown to it again in a refinement turn;
    source: the module the verifier judges (None: rejected before verification, `reason` says why);
    program: for a script answer, the program the compiler decoded from it.
    """

    origin: Origin
    answer: str
    source: str | None = None
    program: CompiledProgram | None = None
    verified: bool = False
    reason: str = ""
    ms: float | None = None
    verdict: Any = None


@dataclass
class ModelSearch:
    """What the model's part of a search produced; `stopped` is "" (done), "budget", "cancelled" or "unavailable"."""

    backend: ModelBackend
    settings: ModelSettings
    candidates: list[ModelCandidate] = field(default_factory=list)
    stopped: str = ""
    problem: str = ""
    seconds: float = 0.0

    @property
    def verified(self) -> int:
        return sum(candidate.verified for candidate in self.candidates)

    def best(self) -> ModelCandidate | None:
        """The fastest verified, timed answer; without timings, the first verified one."""
        verified = [candidate for candidate in self.candidates if candidate.verified]
        timed = [candidate for candidate in verified if candidate.ms is not None]
        if timed:
            return min(timed, key=lambda candidate: candidate.ms)
        return verified[0] if verified else None

    def summary(self) -> ModelSearchEntry:
        """The report's `search.model`: which model, what it was asked, what came of its answers, why it stopped."""
        reasons: dict[str, int] = {}
        for candidate in self.candidates:
            if not candidate.verified:
                reason = candidate.reason[:REASON_CHARS]
                reasons[reason] = reasons.get(reason, 0) + 1
        return ModelSearchEntry(
            backend=self.backend.name,
            model=self.backend.model,
            checkpoint=self.backend.checkpoint,
            kind=self.settings.kind,
            samples=self.settings.samples,
            turns=self.settings.turns,
            constrained=self.settings.constrained and not self.backend.unconstrained,
            unconstrained=self.backend.unconstrained,
            answers=len(self.candidates),
            verified=self.verified,
            rejections=[
                {"reason": reason, "count": count} for reason, count in list(reasons.items())[:REPORTED_REASONS]
            ],
            stopped=self.stopped,
            problem=self.problem,
            seconds=round(self.seconds, 2),
        )


class CandidateBuilder:
    """Turns answers into candidates for one target: a kernel answer is the module itself; a script answer is
    decoded by the compiler and written back into the task exactly as a compiler candidate is."""

    def __init__(
        self, task: Task, graph: OpGraph, guards: list[dict[str, Any]], prefix: str, forward_params: list[str]
    ):
        self.task, self.graph, self.guards = task, graph, guards
        self.prefix, self.forward_params = prefix, forward_params
        self._script_constraint: ScriptConstraint | None = None

    def constraint(self, kind: str) -> ScriptConstraint | None:
        """What answers of `kind` are held to while sampled: for a script, the script grammar over this graph's ops
        (`script_grammar`); a kernel answer is free Python."""
        if kind != "script":
            return None
        if self._script_constraint is None:
            self._script_constraint = script_constraint(self.graph)
        return self._script_constraint

    def prompt(self, kind: str, previous: ModelCandidate | None = None) -> str:
        """The first prompt of `kind`, or the refinement prompt after `previous` (its rejection or its time)."""
        if kind == "kernel":
            if previous is None:
                return formats.kernel_prompt(self.task.source)
            return formats.kernel_refine_prompt(
                self.task.source, previous.answer, measured_ms=previous.ms, feedback=previous.reason
            )
        if previous is None:
            return formats.script_prompt(self.graph)
        return formats.refine_prompt(self.graph, previous.answer, measured_ms=previous.ms, feedback=previous.reason)

    def candidate(self, origin: Origin, completion: str) -> ModelCandidate:
        if origin.kind == "kernel":
            kernel = formats.extract_kernel_answer(completion)
            if not kernel.valid:
                return ModelCandidate(origin, completion.strip(), reason=f"malformed answer: {kernel.error}")
            return ModelCandidate(origin, kernel.source, source=kernel.source)
        script = formats.parse_script_answer(completion, self.graph)
        if not script.valid:
            return ModelCandidate(origin, script.script or completion.strip(), reason=f"invalid script: {script.error}")
        try:
            program = compile_graph(
                self.graph, prefix=self.prefix, forward_params=self.forward_params, has_self=True,
                schedule=with_default_replay(script.script, self.graph),
            )
        except DrtritonError as error:
            return ModelCandidate(origin, script.script, reason=f"invalid script: {error.message}")
        target = "Model" if self.task.kind == "module" else self.task.name
        header = f"Triton candidate for {self.task.name} decoded from a schedule script by {origin.describe()}."
        source = verification_candidate(self.task.source, target, program, header, self.guards)
        return ModelCandidate(origin, script.script, source=source, program=program)


# verifies (and on a GPU times) answers; stops its jobs and raises Cancelled as soon as the event is set (the search's
# deadline passed, or the user cancelled), leaving the answers it had not judged with `verdict` None
Measure = Callable[[list[ModelCandidate], threading.Event], None]


def run_model_search(
    backend: ModelBackend,
    settings: ModelSettings,
    builder: CandidateBuilder,
    measure: Measure,
    *,
    seconds: float,
    progress: Callable[[str], None] = lambda _message: None,
    cancel: threading.Event | None = None,
    temperature: float = 0.8,
) -> ModelSearch:
    """Ask the model for `settings.samples` answers per kind, measure them, then give each answer's rejection or
    time back to the model for up to `settings.turns` turns, within `seconds` (sampling and measuring both stop when
    they run out). Never raises for the model's sake: a backend that stops answering, the budget, or a cancel ends
    the search with what was measured so far."""
    started = time.monotonic()
    search = ModelSearch(backend, settings)
    with Deadline(seconds, cancel) as deadline:
        search.stopped = _turns(backend, settings, builder, measure, search, deadline, progress, cancel, temperature)
    if search.stopped == "budget":
        for candidate in search.candidates:
            if candidate.source is not None and candidate.verdict is None:
                candidate.reason = f"not judged: the search's {seconds:g} s ran out first"
        progress(f"model: the search's {seconds:g} s ran out; keeping what was measured ({MODEL_MORE_TIME})")
    search.seconds = time.monotonic() - started
    return search


def _turns(
    backend: ModelBackend, settings: ModelSettings, builder: CandidateBuilder, measure: Measure, search: ModelSearch,
    deadline: Deadline, progress: Callable[[str], None], cancel: threading.Event | None, temperature: float,
) -> str:
    """The search's turns, answers into `search.candidates`; returns why it stopped early ("" if it did not)."""

    def stopped_early() -> str:
        return "cancelled" if cancel is not None and cancel.is_set() else "budget"

    # each chain is one answer being refined: (kind, sample index, its latest candidate or None before turn 0)
    chains: list[tuple[str, int, ModelCandidate | None]] = [(kind, 0, None) for kind in settings.kinds]
    for turn in range(settings.turns + 1):
        if deadline.stop.is_set():
            return stopped_early()
        samples = settings.samples if turn == 0 else 1
        prompts = [builder.prompt(kind, previous) for kind, _sample, previous in chains]
        constraints = [builder.constraint(kind) if settings.constrained else None for kind, _sample, _previous in chains]
        total = samples * len(prompts)
        progress(f"model: turn {turn + 1}/{settings.turns + 1}, asking {backend.name} for {total} answers")
        asked = time.monotonic()
        try:
            answers = backend.complete(
                prompts, Sampling(samples, temperature, max(MAX_TOKENS[kind] for kind in settings.kinds), turn),
                deadline.stop, constraints=constraints,
            )
        except SamplingCancelled:
            return stopped_early()
        except ModelUnavailable as unavailable:
            search.problem = unavailable.message
            progress(f"model: {unavailable.message}; going on with the compiler's candidates")
            return "unavailable"
        fresh: list[ModelCandidate] = []
        for (kind, sample, _previous), completions in zip(chains, answers):
            for number, completion in enumerate(completions):
                origin = Origin(
                    MODEL, kind, backend.name, backend.model, backend.checkpoint,
                    sample=sample if turn else number, turn=turn,
                )
                fresh.append(builder.candidate(origin, completion))
        search.candidates.extend(fresh)
        measurable = [candidate for candidate in fresh if candidate.source is not None]
        progress(
            f"model: turn {turn + 1}: {len(fresh)} answers in {time.monotonic() - asked:.1f} s; verifying "
            f"{len(measurable)} (the rest do not parse)"
        )
        measuring = time.monotonic()
        try:
            measure(measurable, deadline.stop)
        except Cancelled:
            return stopped_early()
        progress(
            f"model: turn {turn + 1}: {sum(c.verified for c in fresh)}/{len(fresh)} answers verified "
            f"in {time.monotonic() - measuring:.1f} s"
        )
        # an answer verified without a time (no GPU) has nothing to improve on: its chain ends
        chains = [
            (candidate.origin.kind, candidate.origin.sample, candidate)
            for candidate in fresh
            if not (candidate.verified and candidate.ms is None)
        ]
        if not chains:
            break
    return ""


class WorkerModelMeasurer:
    """Verifies answers in worker processes, several at once, and on a GPU times the verified ones together with
    the compiler's verified candidate (same process, same inputs), so that the two sources are compared fairly.
    Its jobs show no progress; the stop event (the search's deadline or the session's cancel) stops them."""

    def __init__(self, task: Task, session: WorkerSession, *, device: str, trials: int, input_shapes, parallel: int,
                 compiler_candidate: str | None):
        self.task, self.session, self.device, self.trials = task, session, device, trials
        self.input_shapes, self.parallel = input_shapes, max(1, parallel)
        self.compiler_candidate = compiler_candidate
        self.compiler_ms: float | None = None

    def __call__(self, candidates: list[ModelCandidate], stop: threading.Event) -> None:
        session = self.session.side_jobs(stop)

        def verify_one(candidate: ModelCandidate) -> None:
            try:
                # each verification starts the next one's worker (or the timing job's: the same environment on a GPU)
                verdict = verify_candidate(
                    self.task, candidate.source, session=session, device=self.device, trials=self.trials,
                    input_shapes=self.input_shapes, tf32=bool(candidate.program and candidate.program.tf32),
                    prepare_next=worker_environment(self.device),
                )
            except Cancelled:
                return  # not judged: its verdict stays None
            candidate.verdict, candidate.verified = verdict, verdict.verified
            candidate.reason = "" if verdict.verified else f"rejected by the verifier: {verdict.explanation}"

        # a model often repeats itself: each distinct module is judged once, and its verdict shared
        distinct = list({candidate.source: candidate for candidate in reversed(candidates)}.values())[::-1]
        with ThreadPoolExecutor(max_workers=self.parallel) as pool:
            list(pool.map(verify_one, distinct))
        judged = {candidate.source: candidate for candidate in distinct}
        for candidate in candidates:
            first = judged[candidate.source]
            candidate.verdict, candidate.verified, candidate.reason = first.verdict, first.verified, first.reason
        if stop.is_set():
            raise Cancelled()
        verified = [candidate for candidate in distinct if candidate.verified]
        if self.device == "cpu" or not verified:
            return
        sources = ([self.compiler_candidate] if self.compiler_candidate else []) + [c.source for c in verified]
        try:
            timing = session.call(
                "time_candidates", {"task": self.task.to_json(), "candidates": sources},
                limits=session.limits.benchmark, env={"TRITON_INTERPRET": None},
            )
        except JobFailure as failure:
            if failure.reason == "cancelled":
                raise Cancelled() from failure
            return  # verified but untimed: the compiler's candidate is kept
        times = list(timing["candidate_ms"])
        if self.compiler_candidate:
            self.compiler_ms = times.pop(0)
        timed = {candidate.source: ms for candidate, ms in zip(verified, times)}
        for candidate in candidates:
            candidate.ms = timed.get(candidate.source)
