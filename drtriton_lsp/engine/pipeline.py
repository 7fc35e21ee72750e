"""The main job for one target: extract, capture, generate, verify, benchmark, report; and, on its
outcome, verifying the same kernel again or timing it again without generating anything.

Each step that runs user or generated code is a worker job (a `Runner`'s); this module only
moves text and JSON between them, so the language server can call it from a thread.
"""

from __future__ import annotations

import dataclasses
import datetime
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from drtriton_lsp import __version__
from drtriton_lsp.compiler import aten_schemas
from drtriton_lsp.compiler.codegen import CompiledProgram, compile_graph
from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.compiler.planner import replay_worth_timing
from drtriton_lsp.compiler.script import Schedule, parse_schedule, print_schedule
from drtriton_lsp.engine.devices import COMMAND_LINE_DEVICE, DeviceOption, describe_device, likely_device, resolve_device
from drtriton_lsp.engine.gpus import check_gpu_count
from drtriton_lsp.engine.model_search import CandidateBuilder, WorkerModelMeasurer, run_model_search
from drtriton_lsp.engine.report import (
    Correctness,
    EarlierRun,
    ModelSearchEntry,
    ScheduleSearchEntry,
    SearchSection,
    Winner,
    build_report,
    earlier_timing,
    revised_report,
)
from drtriton_lsp.engine.search import (
    SearchBudget,
    SearchCache,
    WholeProgram,
    WorkerMeasurer,
    default_cache_directory,
    search_schedule,
    tf32_allowed,
)
from drtriton_lsp.engine.session import WorkerSession
from drtriton_lsp.engine.verify import user_input_shapes, verify_candidate, worker_environment
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.models.answer_cache import ANSWERS_FOLDER, CachingBackend
from drtriton_lsp.models.backends import ModelUnavailable, open_backend
from drtriton_lsp.models.settings import ModelSettings
from drtriton_lsp.models.sources import COMPILER, COMPILER_ORIGIN, MODEL
from drtriton_lsp.source.applied import applied_kernels
from drtriton_lsp.source.dispatch import describe_guard
from drtriton_lsp.source.extract import extract_task
from drtriton_lsp.source.pyfile import parse_file
from drtriton_lsp.source.targets import find_targets
from drtriton_lsp.source.writeback import applied_kernel_candidate, verification_candidate
from drtriton_lsp.task import Task

NOT_VERIFIED_NOTE = "not timed: the candidate was not verified"
INTERPRETER_NOTE = "no GPU: verified with the Triton interpreter on CPU, which says nothing about speed"
# Each verification of the same kernel draws its weights and inputs from a base this far from the last one's.
RESEED_STEP = 10_000


@dataclass
class OptimizeOptions:
    """device: "auto" | "cpu" | "cuda"; trials: verification trials with fresh inputs."""

    device: str = "auto"
    trials: int = 5
    # how the user picked `device`, so that refusing it names their option (the CLI's --device by default)
    device_option: DeviceOption = COMMAND_LINE_DEVICE
    # a schedule script to decode instead of the compiler's default (None: the default)
    schedule: str | None = None
    # time verified candidates on the GPU (off: verification only, e.g. when jobs share the GPU)
    benchmark: bool = True
    # also time torch.compile(mode="max-autotune"), the strongest baseline a user can turn on (compiles for minutes)
    compile_max_autotune: bool = False
    # test-time search over schedules (GPU only), its budget, verification jobs at once, and cache
    search: bool = False
    search_budget: SearchBudget = field(default_factory=SearchBudget)
    search_parallel: int = 2
    search_cache: Path | None = None
    # the GPUs of this host a search measures its fragments on, side by side (one fragment to a GPU at a time)
    search_gpus: int = 1
    # a model writing candidates beside the compiler (backend "none": the compiler alone)
    model: ModelSettings = field(default_factory=ModelSettings)


@dataclass
class Outcome:
    """What optimizing one target produced: the report, and what write-back needs.

    guards: what the kernels are specialised on (worker/specialization.py), checked by the written dispatch.
    task / input_shapes: the extracted task and its exported input shapes, so that the same kernel
    can be verified or timed again without extracting, capturing or generating it again.
    """

    report: dict[str, Any]
    program: CompiledProgram | None = None
    guards: list[dict[str, Any]] = field(default_factory=list)
    task: Task | None = None
    input_shapes: dict[str, Any] | None = None

    @property
    def verified(self) -> bool:
        return self.report["status"] == "verified"


class StageClock:
    """Seconds spent in each step of one job, summed per step name, for the report's `search.stages_s`:
    where the time to the first verified kernel goes (worker start, capture, Triton compiles, trials)."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}

    @contextmanager
    def stage(self, name: str):
        start = time.monotonic()
        try:
            yield
        finally:
            self.seconds[name] = round(self.seconds.get(name, 0.0) + time.monotonic() - start, 2)


def optimize_target(
    source: str,
    path: str | None,
    target_name: str,
    *,
    options: OptimizeOptions,
    session: WorkerSession,
) -> Outcome:
    """Run the whole job on one target, its worker jobs in `session` (made for `path`: see WorkerSession.for_file).
    Bad input raises DrtritonError; a rejected candidate is a report."""
    started = time.monotonic()
    clock = StageClock()
    targets = {t.name: t for t in find_targets(source, path)}
    if target_name not in targets:
        raise DrtritonError(
            f"no target named {target_name!r}",
            f"targets in this file: {', '.join(targets) or 'none'}",
            path=path,
        )
    target = targets[target_name]
    session.step("extracting the task")
    with clock.stage("extract"):
        task = extract_task(source, target_name, path)

    session.step("capturing the graph (torch.export) in a worker")
    # the verification's worker starts while the capture runs; its device is a guess until capture reports the devices
    with clock.stage("capture"):
        capture = session.run(
            "capture", {"task": task.to_json()}, limits=session.limits.capture,
            prepare_next=worker_environment(likely_device(options.device, session.runner.host is not None)),
            prepare_next_for="verify",
        )
    devices = capture["devices"]
    device = resolve_device(options.device, devices, path, options.device_option)
    graph = OpGraph.from_json(capture["graph"])
    aten_schemas.remember(capture["schemas"])
    guards = capture["guards"]
    # verification and timing may hold the task's tensors several times over: their caps follow the task's size
    session = session.for_task(graph, device, devices.get("cuda_memory_bytes"))
    if options.search:
        check_gpu_count(options.search_gpus, device, devices)
    # TF32 where the user's settings let PyTorch use it (a search's variants; the report says which kernels did)
    tf32_templates = tf32_allowed(capture.get("precision", {}))
    options = dataclasses.replace(
        options, search_budget=dataclasses.replace(options.search_budget, tf32_templates=tf32_templates)
    )
    device_info = describe_device(device, devices)
    versions = devices["versions"]

    def compile_schedule(schedule: str | None) -> CompiledProgram:
        """The target's program under a schedule script (None: the compiler's default)."""
        return compile_graph(
            graph,
            prefix=snake_case(target_name),
            forward_params=list(target.forward_params),
            has_self=True,  # a function target's Task wraps it in a Model, whose forward takes self
            schedule=schedule,
        )

    session.step("generating Triton kernels")
    with clock.stage("generate"):
        program = compile_schedule(options.schedule)
    search = SearchSection(
        backend="compiler", candidates=1 if program.kernels else 0, verified=0, seconds=0.0,
        stages_s=clock.seconds, capture_note=capture.get("capture_note", ""),
        candidates_by_source={COMPILER: 1 if program.kernels else 0},
    )
    common = dict(
        file=path,
        target=target_name,
        device=device_info,
        search=search,
        replaced_ops=list(program.replaced_ops),
        kept_ops=list(program.kept_ops),
        versions=versions,
        specialization=specialization_of(guards, task),
    )
    trial = None
    if program.kernels:
        trial = _verify_and_time_replay_choice(
            task, graph, program, guards, device, device_info, options, session, clock, search, compile_schedule
        )
        search.verified += int(trial.verdict.verified)
        if trial.verdict.verified:
            search.first_verified_s = round(trial.verified_at - started, 2)
            search.winner = Winner(COMPILER_ORIGIN)
        if options.search and trial.verdict.verified:
            trial = _search(
                task, graph, program, guards, trial, device, device_info, options, session, search, versions,
                snake_case(target_name), compile_schedule, clock,
            )
        search.candidates_by_source[COMPILER] = search.candidates
    if options.model.enabled:
        with clock.stage("model"):
            trial = _model_search(
                task, graph, guards, trial, device, options, session, search, snake_case(target_name),
                list(target.forward_params),
            )
    if trial is None:
        search.seconds = round(time.monotonic() - started, 2)
        return Outcome(
            build_report(
                status="no_candidate",
                verdict=None,
                timing=None,
                timing_note="nothing was generated",
                kernel_source=None,
                schedule=program.schedule,
                message=no_candidate_message(program) + model_note(search),
                **common,
            ),
            program,
            guards,
            task,
            user_input_shapes(graph),
        )

    search.seconds = round(time.monotonic() - started, 2)
    # a module a model wrote has no plan: only the verifier's audit of what ran says which ops it replaced
    planned = (trial.program.replaced_ops, trial.program.kept_ops) if trial.program else ([], [])
    common["replaced_ops"], common["kept_ops"] = ops_of(trial.verdict, *planned)
    report = build_report(
        status="verified" if trial.verdict.verified else "failed",
        verdict=trial.verdict,
        timing=trial.timing,
        timing_note=trial.timing_note,
        kernel_source=trial.candidate,
        schedule=trial.program.schedule if trial.program else None,
        message="" if trial.verdict.verified else trial.verdict.explanation,
        precision={
            "triton": ("tf32" if trial.program.tf32 else "ieee") if trial.program else "as written",
            "tf32_allowed": list(tf32_templates),
        },
        **common,
    )
    return Outcome(report, trial.program, guards, task, user_input_shapes(graph))


def no_candidate_message(program: CompiledProgram) -> str:
    """Why the compiler generated no kernel for a target."""
    if program.kept_copies:
        copies = ", ".join(sorted(set(program.kept_copies)))
        return (
            f"the only ops a Triton kernel could take here copy data ({copies}); a kernel that only copies computes "
            "nothing, so every op stays in PyTorch"
        )
    return "no op of this target maps to a Triton template yet; every op stays in PyTorch"


def applied_outcome(source: str, path: str, target_name: str) -> Outcome:
    """The kernel already written into the file for `target_name`, as an outcome that Verify and Benchmark take:
    the task (the file's target without the written block and decorator) and, as the kernel, that task with the
    block and decorator written in exactly as they stand in the file. Runs no code."""
    applied = applied_kernels(parse_file(source, path)).get(target_name)
    if applied is None:
        raise DrtritonError(f"{target_name} has no kernel written into the file", "run Generate, then Apply, first")
    task = extract_task(source, target_name, path)
    task_target = "Model" if task.kind == "module" else target_name
    report = build_report(
        file=path,
        target=target_name,
        status="applied",
        message=f"written into the file ({applied.summary()})",
        device={"kind": "unknown", "name": "not verified in this session"},
        verdict=None,
        timing=None,
        timing_note="not timed in this session",
        search=None,
        kernel_source=applied_kernel_candidate(task.source, task_target, source, applied),
        schedule=None,
        replaced_ops=[],
        kept_ops=[],
    )
    return Outcome(report=report, task=task)


def model_note(search: SearchSection) -> str:
    """What the model's part of a search that produced no verified kernel amounts to ("" without a model)."""
    model = search.model
    if model is None:
        return ""
    if model.problem:
        return f"; the model gave no candidate: {model.problem}"
    return f"; none of the model's {model.answers} answers was verified"


def write_back_refusal(outcome: Outcome) -> str:
    """Why the outcome's verified kernel cannot be written into the user's file ("" when it can)."""
    if outcome.program is None:
        return (
            "its kernel is a module a model wrote (the report's kernel.source); write-back takes the compiler's "
            "programs (kernels and schedule scripts) only, so the original stays"
        )
    return ""


def reverify_refusal(outcome: Outcome) -> str:
    """Why the outcome's kernel cannot be verified again ("" when it can)."""
    return _no_kernel_to("verify", outcome)


def retime_refusal(outcome: Outcome) -> str:
    """Why the outcome's kernel cannot be timed again ("" when it can): it must exist and be verified."""
    refusal = _no_kernel_to("benchmark", outcome)
    if refusal or outcome.verified:
        return refusal
    return (
        f"its kernel is not verified ({outcome.report['message'] or outcome.report['status']}), and the speed of a "
        "kernel that may be wrong means nothing; verify it first"
    )


def reverify_outcome(outcome: Outcome, *, options: OptimizeOptions, session: WorkerSession) -> Outcome:
    """Verify the outcome's kernel again, as it is (nothing is generated), with `options.trials` trials on
    `options.device` and inputs and weights drawn from new seeds, in `session` (made for the report's file). The
    report keeps the run it repeats; its timing stays only while it still describes the device the kernel was
    verified on."""
    refusal = reverify_refusal(outcome)
    if refusal:
        raise DrtritonError(refusal, "generate a kernel for the target first")
    report = outcome.report
    path = report["file"]
    devices = _worker_devices(session, options)
    device = resolve_device(options.device, devices, path, options.device_option)
    device_info = describe_device(device, devices)
    previous = EarlierRun.of(report)
    session.step(f"verifying the same kernel again on {device_info['kind']}, with new inputs")
    verdict = verify_candidate(
        outcome.task,
        report["kernel"]["source"],
        session=session,
        device=device,
        trials=options.trials,
        input_shapes=outcome.input_shapes,
        tf32=bool(outcome.program and outcome.program.tf32),
        seed=previous.seed + RESEED_STEP,
    )
    timing, timing_note = report["timing"], report["timing_note"]
    if not verdict.verified:
        timing, timing_note = None, NOT_VERIFIED_NOTE
    elif device == "cpu":
        timing, timing_note = None, INTERPRETER_NOTE
    elif timing is None or device_info != report["device"]:
        timing, timing_note = None, f"not timed on {device_info['name']} yet: benchmark it"
    replaced, kept = ops_of(verdict, report["replaced_ops"], report["kept_ops"])
    revised = revised_report(
        report,
        replaced_ops=replaced,
        kept_ops=kept,
        status="verified" if verdict.verified else "failed",
        message="" if verdict.verified else verdict.explanation,
        device=device_info,
        correctness=Correctness(verdict, previous).to_json(),
        timing=timing,
        timing_note=timing_note,
        versions=devices["versions"],
    )
    return dataclasses.replace(outcome, report=revised)


def retime_outcome(outcome: Outcome, *, options: OptimizeOptions, session: WorkerSession) -> Outcome:
    """Time the outcome's verified kernel again against eager PyTorch and torch.compile on the GPU, from its
    stored source (nothing is generated), in `session` (made for the report's file). Refuses without a GPU, and a
    kernel verified on another device."""
    refusal = retime_refusal(outcome)
    if refusal:
        raise DrtritonError(refusal, "a kernel is timed only once it is verified on the device it runs on")
    report = outcome.report
    option = options.device_option
    why_no_speed = "Triton's interpreter on the CPU runs kernels at a speed that says nothing about GPUs"
    if options.device == "cpu":
        raise DrtritonError(
            f"no speed measured: {option.reads('cpu')}; {option.to_choose('cuda')} on a machine with a GPU", why_no_speed
        )
    path = report["file"]
    devices = _worker_devices(session, options)
    device = resolve_device(options.device, devices, path, option)
    if device == "cpu":
        raise DrtritonError(f"no speed measured: no GPU here; {option.to_choose('cuda')} on a machine with a GPU", why_no_speed)
    device_info = describe_device(device, devices)
    if device_info != report["device"]:
        verified_on = report["device"]
        raise DrtritonError(
            f"the kernel was verified on {verified_on['name']} ({verified_on['kind']}), not on {device_info['name']}; "
            "verify it there first, then benchmark it",
            "a kernel is timed only on the device it was verified on",
        )
    session.step(f"benchmarking the same kernel again: eager, torch.compile and Triton on {device_info['name']}")
    measured = session.run(
        "benchmark",
        benchmark_params(outcome.task, report["kernel"]["source"], options),
        limits=session.limits.benchmark,
        env=worker_environment(device),
    )
    timing = measured["timing"]
    if timing is not None:
        timing["previous"] = earlier_timing(report)
    revised = revised_report(report, timing=timing, timing_note=measured["reason"], versions=devices["versions"])
    return dataclasses.replace(outcome, report=revised)


def benchmark_params(task: Task, candidate: str, options: OptimizeOptions) -> dict[str, Any]:
    """The worker's `benchmark` request: the task, the candidate's source, and whether to time max-autotune too."""
    return {"task": task.to_json(), "candidate": candidate, "max_autotune": options.compile_max_autotune}


def _no_kernel_to(action: str, outcome: Outcome) -> str:
    report = outcome.report
    if report["status"] == "no_candidate":
        return f"nothing was generated for it (every op stays in PyTorch), so there is no kernel to {action}"
    if outcome.task is None or not report["kernel"]["source"]:
        return f"there is no kernel to {action} ({report['status']}: {report['message'] or 'no candidate'})"
    return ""


def _worker_devices(session: WorkerSession, options: OptimizeOptions) -> dict[str, Any]:
    """The devices a worker sees; meanwhile, the worker of the job that follows (on the likely device) starts."""
    session.step("checking the worker's devices")
    return session.run(
        "capabilities", {}, limits=session.limits.capabilities,
        prepare_next=worker_environment(likely_device(options.device, session.runner.host is not None)),
    )


@dataclass
class _Trial:
    """One candidate, verified and (on a GPU) timed; `program`: the compiled program it was written from (None: a
    module a model wrote, which write-back cannot take)."""

    program: CompiledProgram | None
    candidate: str
    verdict: Any
    timing: dict[str, Any] | None
    timing_note: str
    verified_at: float  # time.monotonic() when the verdict was known (timing comes after)
    # a module that replays CUDA graphs: its timing with the replay off, from the same benchmark
    plain_timing: dict[str, Any] | None = None


def written_back_candidate(task: Task, program, guards: list[dict[str, Any]]) -> str:
    """The task with its target written back as the user's file will be: what is verified and timed is the written
    dispatch, guards included."""
    target = "Model" if task.kind == "module" else task.name
    return verification_candidate(task.source, target, program, candidate_header(task, program), guards)


def _verify_and_time(
    task, graph, program, guards, device, device_info, options: OptimizeOptions, session: WorkerSession,
    clock: StageClock, stage_prefix: str = "", measured_timing: dict[str, Any] | None = None,
) -> _Trial:
    """Verifies the written-back module of `program` and, verified on a GPU, benchmarks it; `measured_timing`: its
    timing already measured (the plain form of a replayed module, timed beside it), used instead of a benchmark."""
    candidate = written_back_candidate(task, program, guards)
    benchmark_follows = device != "cpu" and options.benchmark  # when the candidate is verified
    session.step(f"verifying on {device_info['kind']}")
    with clock.stage(f"{stage_prefix}verify"):
        verdict = verify_candidate(
            task,
            candidate,
            session=session,
            device=device,
            trials=options.trials,
            input_shapes=user_input_shapes(graph),
            tf32=program.tf32,
            prepare_next=worker_environment(device) if benchmark_follows else None,
        )
    verified_at = time.monotonic()
    timing, timing_note, plain_timing = None, "", None
    if not verdict.verified:
        timing_note = NOT_VERIFIED_NOTE
    elif device == "cpu":
        timing_note = INTERPRETER_NOTE
    elif not options.benchmark:
        timing_note = "not timed: verification only was asked for"
    elif measured_timing is not None:
        timing = measured_timing
    else:
        session.step("benchmarking eager, torch.compile and Triton on the GPU")
        with clock.stage(f"{stage_prefix}benchmark"):
            measured = session.run(
                "benchmark", benchmark_params(task, candidate, options), limits=session.limits.benchmark,
                env=worker_environment(device),
            )
        timing, timing_note, plain_timing = measured["timing"], measured["reason"], measured.get("plain_timing")
    return _Trial(program, candidate, verdict, timing, timing_note, verified_at, plain_timing)


# the plain forward is verified and kept only when it timed faster than the replayed one by more than this share
PLAIN_FASTER_BY = 0.03
# verdicts of a replayed module that its plain form may not share: results differing under replay, and the memory the
# graph's own buffers and input copies take
REPLAY_FAILURES = ("wrong_under_replay", "memory_limit")


def _verify_and_time_replay_choice(
    task, graph, program: CompiledProgram, guards, device, device_info, options: OptimizeOptions,
    session: WorkerSession, clock: StageClock, search: SearchSection, compile_schedule,
) -> _Trial:
    """`_verify_and_time` of the default program; on a GPU, where replaying its forward as CUDA graphs may pay
    (planner.replay_worth_timing), the program is verified replayed (the judge also runs it plainly) and timed both
    ways, and the plain program is verified and kept when it is faster. A given schedule is taken as it is.
    compile_schedule: schedule script -> CompiledProgram."""
    steps = parse_schedule(program.schedule).steps
    measures_replay = (
        device != "cpu" and options.benchmark and options.schedule is None and replay_worth_timing(steps, graph)
    )
    if not measures_replay:
        return _verify_and_time(task, graph, program, guards, device, device_info, options, session, clock)
    replayed_program = program if program.replay else compile_schedule(print_schedule(Schedule(steps, replay=True)))
    replayed = _verify_and_time(task, graph, replayed_program, guards, device, device_info, options, session, clock)
    replay = replayed.timing.get("replay") if replayed.timing else None
    if not replayed.verdict.verified:
        if replayed.verdict.reason not in REPLAY_FAILURES:
            return replayed  # the plain module runs the same kernels: it would fail alike
    elif replay is None:
        return replayed  # not timed (no benchmark could run): nothing to choose by
    elif replay["plain_ms"] >= replay["replayed_ms"] * (1 - PLAIN_FASTER_BY):
        search.replay_choice = {**replay, "kept": "replayed"}
        return replayed
    # faster plainly, or failed where only the replay could fail it
    session.step("verifying the forward without its CUDA-graph replay")
    plain_program = compile_schedule(print_schedule(Schedule(steps)))
    # the two forms were compared back to back in one process (the fairest timing of a host-bound module: the plain
    # module's own benchmark, in another process, gave bert_embeddings 0.13 ms where that comparison gave 0.086), so
    # the plain form keeps that timing; it is benchmarked on its own only when the replayed form could not be timed
    plain = _verify_and_time(
        task, graph, plain_program, guards, device, device_info, options, session, clock, stage_prefix="plain ",
        measured_timing=replayed.plain_timing,
    )
    faster = plain.verdict.verified
    if replay is not None:
        search.replay_choice = {**replay, "kept": "plain" if faster else "replayed"}
    kept, other = (plain, replayed) if faster else (replayed, plain)
    search.candidates += 1  # the other form; the caller counts the kept one
    search.verified += int(other.verdict.verified)
    return kept


def _search(
    task, graph, program, guards, default, device, device_info, options: OptimizeOptions, session: WorkerSession,
    search: SearchSection, versions, name, compile_schedule, clock: StageClock,
) -> _Trial:
    """Search the schedule (GPU only: choosing needs timings), then keep whichever whole program,
    default or searched, is faster end to end. Updates the report's `search` entry in place.
    name: the target's name in kernel names; compile_schedule: schedule script -> CompiledProgram."""
    if device == "cpu":
        search.note = "not searched: choosing between verified schedules needs timings, and there is no GPU"
        return default
    search.backend = "compiler+search"
    cache = SearchCache(options.search_cache or default_cache_directory())
    environment = {"device": device_info["name"], **versions}
    budget = options.search_budget
    if options.model.enabled:  # the model's answers share the target's budget: the schedule search takes half
        budget = dataclasses.replace(budget, seconds=budget.seconds / 2)
    key = cache.key(task.source, graph, environment, budget)
    result = cache.load(key)
    if result is None:
        def candidate_of(schedule: str) -> str:
            return written_back_candidate(task, compile_schedule(schedule), guards)

        with clock.stage("search"), session.on_each_gpu(options.search_gpus) as gpu_sessions:
            first, *others = [
                WorkerMeasurer(gpu_session, device=device, trials=options.trials, parallel=options.search_parallel)
                for gpu_session in gpu_sessions
            ]
            result = search_schedule(
                graph, parse_schedule(program.schedule), name=name, measure=first,
                budget=budget, progress=session.step, cancel=session.cancel, whole=WholeProgram(task, candidate_of),
                more_measures=others,
            )
        cache.store(key, result)
    else:
        session.step("search result found in the cache")
    search.candidates += result.candidates
    search.verified += result.verified
    fragments = [
        {"ops": fragment.ops, "chosen": fragment.chosen, "pytorch_ms": fragment.pytorch_ms, "chosen_ms": fragment.best.ms}
        for fragment in result.fragments
    ]
    if result.schedule == program.schedule or session.cancelled():
        search.schedule_search = ScheduleSearchEntry(result.cached, result.stopped, fragments, kept="default")
        return default
    searched_program = compile_schedule(result.schedule)
    session.step("verifying and timing the searched schedule end to end")
    searched = _verify_and_time(
        task, graph, searched_program, guards, device, device_info, options, session, clock, stage_prefix="searched "
    )
    search.verified += int(searched.verdict.verified)
    faster = (
        searched.verdict.verified
        and searched.timing is not None
        and default.timing is not None
        and searched.timing["triton_ms"] < default.timing["triton_ms"]
    )
    search.schedule_search = ScheduleSearchEntry(
        result.cached, result.stopped, fragments, kept="searched" if faster else "default",
        end_to_end_ms=(
            default.timing["triton_ms"] if default.timing else None,
            searched.timing["triton_ms"] if searched.timing else None,
        ),
    )
    return searched if faster else default


def _model_search(
    task, graph, guards, compiler, device, options: OptimizeOptions, session: WorkerSession, search: SearchSection,
    prefix, forward_params,
) -> _Trial | None:
    """The model's answers beside the compiler's result `compiler` (None: the compiler generated nothing), through
    the same verifier and benchmark; returns the winner's trial. Updates the report's `search` entry in place."""
    search.backend += "+model"
    try:
        backend = open_backend(options.model, session.runner)
    except ModelUnavailable as unavailable:
        search.model = ModelSearchEntry.unopened(options.model.backend, unavailable.message)
        session.step(f"model: {unavailable.message}; going on with the compiler's candidates")
        return compiler
    if backend.checkpoint:  # a local checkpoint: its answers are kept beside the search's results
        backend = CachingBackend(backend, (options.search_cache or default_cache_directory()) / ANSWERS_FOLDER)
    compiler_verified = compiler is not None and compiler.verdict.verified
    measurer = WorkerModelMeasurer(
        task, session, device=device, trials=options.trials, input_shapes=user_input_shapes(graph),
        parallel=options.search_parallel, compiler_candidate=compiler.candidate if compiler_verified else None,
    )
    builder = CandidateBuilder(task, graph, guards, prefix, forward_params)
    # the target's search budget, less what the schedule search spent of it
    seconds = max(0.0, options.search_budget.seconds - search.stages_s.get("search", 0.0))
    result = run_model_search(
        backend, options.model, builder, measurer, seconds=seconds, progress=session.step, cancel=session.cancel
    )
    search.model = result.summary()
    if isinstance(backend, CachingBackend):
        search.model = dataclasses.replace(search.model, cached=backend.answered_from_cache)
    search.candidates += len(result.candidates)
    search.verified += result.verified
    search.candidates_by_source[MODEL] = len(result.candidates)
    best = result.best()
    if best is None or result.stopped == "cancelled":
        return compiler
    if compiler_verified and (best.ms is None or measurer.compiler_ms is None or best.ms >= measurer.compiler_ms):
        return compiler  # untimed (no GPU) or not faster: the compiler's verified kernel stays
    search.winner = Winner(best.origin, best.ms, measurer.compiler_ms)
    session.step(f"the winner is {best.origin.describe()}")
    timing, timing_note = None, INTERPRETER_NOTE
    if device != "cpu" and options.benchmark:
        session.step("benchmarking the model's kernel: eager, torch.compile and Triton on the GPU")
        measured = session.run(
            "benchmark", benchmark_params(task, best.source, options), limits=session.limits.benchmark,
            env=worker_environment(device),
        )
        timing, timing_note = measured["timing"], measured["reason"]
    elif device != "cpu":
        timing_note = "not timed: verification only was asked for"
    return _Trial(best.program, best.source, best.verdict, timing, timing_note, time.monotonic())


def ops_of(verdict, planned_replaced, planned_kept) -> tuple[list[str], list[str]]:
    """(replaced, kept) ops for the report: from the verifier's ATen audit of what ran when the candidate ran that
    far, else the plan (a candidate rejected before it ran)."""
    if verdict.replaced_ops is not None and verdict.kept_ops is not None:
        return list(verdict.replaced_ops), list(verdict.kept_ops)
    return list(planned_replaced), list(planned_kept)


def specialization_of(guards: list[dict[str, Any]], task: Task) -> dict[str, Any]:
    """The report's `specialization`: each guard the written dispatch checks, with its text; and the scalars
    passed to the kernels at run time instead (none yet: every value the kernels depend on is guarded)."""
    return {
        "guards": [{**guard, "text": describe_guard(guard, task.name)} for guard in guards],
        "runtime_args": [],
    }


def candidate_header(task: Task, program: CompiledProgram) -> str:
    replaced = ", ".join(sorted(set(program.replaced_ops))) or "none"
    kept = ", ".join(sorted(set(program.kept_ops))) or "none"
    return (
        f"Triton candidate for {task.name} generated by drtriton {__version__} (embedded compiler).\n\n"
        f"In Triton: {replaced}.\nKept in PyTorch: {kept}.\n\nSchedule:\n{program.schedule}"
    )


def provenance_text(outcome: Outcome) -> str:
    """The comment block written above kernels in the user's file: what, how verified, how fast."""
    report = outcome.report
    correctness = report["correctness"] or {}
    timing = report["timing"]
    tolerance = "; ".join(
        f"{dtype} atol {t['atol']:g} rtol {t['rtol']:g}" for dtype, t in (correctness.get("tolerance") or {}).items()
    )
    where = "Triton interpreter on CPU at reduced sizes" if correctness.get("interpreter") else report["device"]["name"]
    if timing:
        speed = f"{timing['speedup_vs_eager']:.2f}x vs eager"
        if timing.get("speedup_vs_compile"):
            speed += f", {timing['speedup_vs_compile']:.2f}x vs torch.compile"
        speed += f" on {report['device']['name']} (median, {timing['triton_ms']:.4g} ms)"
    else:
        speed = f"not measured ({report['timing_note']})"
    date = datetime.date.today().isoformat()
    return "\n".join(
        [
            f"Generated by drtriton {__version__} on {date} for {report['target']}.",
            f"Replaces in Triton: {', '.join(sorted(set(report['replaced_ops'])))}; "
            f"kept in PyTorch: {', '.join(sorted(set(report['kept_ops']))) or 'nothing'}.",
            f"Verified: {correctness.get('passed')}/{correctness.get('trials')} trials ({tolerance}) on {where}.",
            f"Speed: {speed}.",
            "Runs only without autograd (torch.no_grad / inference_mode), on CUDA tensors, and when every value",
            "below is as verified; otherwise the original runs (saying once why, through warnings).",
            "Remove this block and the @drtriton_dispatch line to undo.",
            "Specialised on (checked at every call):",
        ]
        + [f"  {guard['text']}" for guard in (report.get("specialization") or {}).get("guards", [])]
        + ["Schedule script (save it to a file and pass --schedule FILE to reproduce or refine):"]
        + [f"  {line}" for line in (report["kernel"].get("schedule") or "").splitlines()]
    )


def snake_case(name: str) -> str:
    out = []
    for index, char in enumerate(name):
        if char.isupper() and index and (not name[index - 1].isupper() or (index + 1 < len(name) and name[index + 1].islower())):
            out.append("_")
        out.append(char.lower())
    return "".join(out).strip("_")

