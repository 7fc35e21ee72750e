"""`drtriton-train teach`: the product's compiler and verifier as teacher, CSP-DAG programs in, SFT examples out.

Per program: capture (a worker), the compiler's default schedule, the candidate it decodes to, the product's
verifier (workers); then JSONL examples in the product's model formats (`drtriton_lsp.models.formats`).
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from drtriton_lsp import __version__ as DRTRITON_VERSION
from drtriton_lsp.compiler.codegen import CompiledProgram, compile_graph
from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.engine.pipeline import OptimizeOptions, optimize_target, written_back_candidate
from drtriton_lsp.engine.search import SearchBudget
from drtriton_lsp.engine.session import WorkerLimits, WorkerSession
from drtriton_lsp.engine.verify import Verdict, user_input_shapes, verify_candidate, worker_environment
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.models import formats
from drtriton_lsp.runners.local import JobFailure, JobLimits, LocalRunner
from drtriton_lsp.source.candidate import build_candidate
from drtriton_lsp.source.targets import find_targets
from drtriton_lsp.task import Task

from drtriton_training.programs import SyntheticProgram, heldout_hashes

RECORD_SCHEMA = "drtriton.teach/1"
TARGET = "Model"
PREFIX = "model"
# The docstring of every teacher kernel: it says what the module is and nothing a model could not know.
KERNEL_DOCSTRING = "ModelNew: Model's forward computed by Triton kernels."
VALIDATION_PERCENT = 5
EXAMPLES_GLOB = "examples-*.jsonl"
LEDGER_GLOB = "programs-*.jsonl"
# Example kinds: the script writer's two tasks and the kernel writer's one.
KINDS = ("script", "refine", "kernel")


@dataclass(frozen=True)
class Shard:
    """Shard `index` of `count` (0-based): the programs whose hash falls to it, so shards never overlap."""

    index: int = 0
    count: int = 1

    @classmethod
    def parse(cls, text: str) -> Shard:
        """"3/16" -> Shard(3, 16); raises ValueError with what to write instead."""
        try:
            index, count = (int(part) for part in text.split("/"))
        except ValueError:
            raise ValueError(f"--shard takes INDEX/COUNT such as 0/4; got {text!r}") from None
        if count < 1 or not 0 <= index < count:
            raise ValueError(f"--shard {text}: INDEX must be in 0..COUNT-1 and COUNT at least 1")
        return cls(index, count)

    def holds(self, program_hash: str) -> bool:
        return int(program_hash[:12], 16) % self.count == self.index

    @property
    def suffix(self) -> str:
        return f"{self.index:03d}-of-{self.count:03d}"


@dataclass
class TeachOptions:
    """device: where the verifier runs ("cpu": Triton's interpreter); verify: off writes unverified examples
    (marked so) in a fraction of the time; search (GPU only): also run the product's schedule search and keep
    (default -> searched) refinement pairs; trials: verification trials, as `drtriton optimize`."""

    device: str = "cpu"
    verify: bool = True
    search: bool = False
    search_budget: SearchBudget = field(default_factory=lambda: SearchBudget(seconds=30.0))
    trials: int = OptimizeOptions().trials
    capture_limits: JobLimits = field(default_factory=lambda: JobLimits(timeout_s=180))
    verify_limits: JobLimits = field(default_factory=lambda: JobLimits(timeout_s=600))


def teacher_version() -> dict[str, Any]:
    """What taught an example: a model trained on it is served with the same format version."""
    return {"drtriton": DRTRITON_VERSION, "format": formats.FORMAT_VERSION}


def split_of(program_hash: str) -> str:
    """"validation" for a fixed ~5 % of hashes, else "train": the same program is on the same side everywhere."""
    return "validation" if int(program_hash[:12], 16) % 100 < VALIDATION_PERCENT else "train"


def read_programs(directory: Path) -> list[SyntheticProgram]:
    """The programs of a `drtriton-train synth` output (its index.jsonl and program files)."""
    index = directory / "index.jsonl"
    if not index.is_file():
        raise DrtritonError(
            f"{directory} has no index.jsonl", "point --programs at the output of `drtriton-train synth --out DIR`"
        )
    programs = []
    for line in index.read_text().splitlines():
        record = json.loads(line)
        programs.append(SyntheticProgram((directory / record["path"]).read_text(), record))
    return programs


@dataclass
class Capture:
    """A program captured and compiled with the compiler's default schedule."""

    task: Task
    graph: OpGraph
    program: CompiledProgram
    forward_params: list[str]
    # what the kernels are specialised on (the written dispatch checks them); None: not kept (an older record)
    guards: list[dict[str, Any]] | None = None

    @property
    def dtype(self) -> str:
        floats = [g.spec.dtype for g in self.graph.inputs if g.spec and g.spec.dtype.startswith(("float", "bfloat"))]
        return floats[0] if floats else "float32"


def capture_program(
    source: str, runner: LocalRunner, limits: JobLimits, verify_device: str | None = None
) -> Capture:
    """Capture a KernelBench-form program in a worker and compile its default schedule (raises DrtritonError).

    verify_device: the device a verification that follows runs on; its worker starts during the capture."""
    task = Task(name=TARGET, kind="module", source=source)
    targets = {target.name: target for target in find_targets(source, None)}
    if TARGET not in targets:
        raise DrtritonError("the program defines no class Model", "teach reads KernelBench-form programs")
    try:
        captured = runner.call(
            "capture", {"task": task.to_json()}, limits=limits,
            prepare_next=worker_environment(verify_device) if verify_device else None, prepare_next_for="verify",
        )
    except JobFailure as failure:
        raise DrtritonError(f"the capture worker failed: {failure.detail}", failure.stderr_tail or "") from failure
    graph = OpGraph.from_json(captured["graph"])
    forward_params = list(targets[TARGET].forward_params)
    program = compile_graph(graph, prefix=PREFIX, forward_params=forward_params, has_self=True)
    return Capture(task, graph, program, forward_params, captured["guards"])


def kernel_candidate(capture: Capture, program: CompiledProgram | None = None) -> str:
    """The ModelNew module a compiled program decodes to, as the product assembles it."""
    return build_candidate(capture.task.source, program or capture.program, KERNEL_DOCSTRING)


def written_candidate(capture: Capture, program: CompiledProgram | None = None) -> str:
    """What the product verifies and times for a compiled program: the task with its forward written back (the
    dispatch, its guards, and the CUDA-graph replay where the schedule has one). Without the capture's guards (a
    record captured before they were kept): the plain ModelNew of `kernel_candidate`, which never replays."""
    program = program or capture.program
    if capture.guards is None:
        return kernel_candidate(capture, program)
    return written_back_candidate(capture.task, program, capture.guards)


# The worker environment of each job teach and eval run: a capture's is the runner's own (no changes).
NEXT_JOB_ENVIRONMENTS: dict[str, Callable[[str], dict[str, str | None]]] = {
    "capture": lambda device: {},
    "verify": worker_environment,
}


def verify_module(
    capture: Capture, module_source: str, options: TeachOptions, runner: LocalRunner, tf32: bool = False,
    then: str | None = None,
) -> Verdict:
    """The product's verifier on a ModelNew module for the captured program.

    then: the job that follows ("capture" or "verify"), whose worker starts during this verification (a worker's
    imports take seconds; started cold for every program, they were most of teach's time on the H200)."""
    return verify_candidate(
        capture.task,
        module_source,
        session=WorkerSession(runner, limits=WorkerLimits(verify=options.verify_limits)),
        device=options.device,
        trials=options.trials,
        input_shapes=user_input_shapes(capture.graph),
        tf32=tf32,
        prepare_next=NEXT_JOB_ENVIRONMENTS[then](options.device) if then else None,
        prepare_next_for=then or "benchmark",
    )


def verdict_record(verdict: Verdict | None, device: str) -> dict[str, Any] | None:
    if verdict is None:
        return None
    return {
        "verified": verdict.verified,
        "reason": verdict.reason,
        "detail": verdict.detail[:500],
        "trials": verdict.trials,
        "passed": verdict.passed,
        "interpreter": verdict.interpreter,
        "device": device,
    }


def teach_program(program: SyntheticProgram, options: TeachOptions, runner: LocalRunner) -> tuple[dict, list[dict]]:
    """(ledger entry, examples) for one program. The ledger says what happened; examples exist only for programs
    the teacher compiled (verified ones, unless verification is off, in which case they say so)."""
    started = time.monotonic()
    common = {
        "schema": RECORD_SCHEMA,
        "hash": program.hash,
        "level": program.metadata["level"],
        "ops": program.metadata.get("ops", []),
        "split": split_of(program.hash),
        "teacher": teacher_version(),
    }
    try:
        verify_device = options.device if options.verify else None
        capture = capture_program(program.source, runner, options.capture_limits, verify_device)
    except DrtritonError as error:
        return {**common, "status": "error", "reason": error.message[:500], "seconds": _since(started)}, []
    except Exception as error:  # noqa: BLE001 - a drtriton bug on this program: record it, teach the others
        reason = f"internal error: {type(error).__name__}: {error}"[:500]
        return {**common, "status": "error", "reason": reason, "seconds": _since(started)}, []
    common["dtype"] = capture.dtype
    script = capture.program.schedule
    kernels = bool(capture.program.kernels)
    verdict = None
    candidate = kernel_candidate(capture) if kernels else None
    if kernels and options.verify:
        # the next program's capture worker starts meanwhile
        verdict = verify_module(capture, candidate, options, runner, tf32=capture.program.tf32, then="capture")
    if not kernels:
        status = "no_candidate"
    elif verdict is None:
        status = "unverified"
    else:
        status = "verified" if verdict.verified else "rejected"
    verdict_json = verdict_record(verdict, options.device)
    examples: list[dict] = []
    if status in ("verified", "unverified", "no_candidate"):
        examples.append({
            **common, "kind": "script", "status": status, "verdict": verdict_json,
            "prompt": formats.script_prompt(capture.graph), "completion": formats.script_completion(script),
        })
    if status in ("verified", "unverified"):
        examples.append({
            **common, "kind": "kernel", "status": status, "verdict": verdict_json,
            "prompt": formats.kernel_prompt(program.source), "completion": formats.kernel_completion(candidate),
        })
    if options.search and status == "verified":
        refinement = _searched_refinement(program, capture, options, runner, common)
        if refinement is not None:
            examples.append(refinement)
    entry = {
        **common, "status": status, "reason": verdict.reason if verdict else None,
        "kernels": len(capture.program.kernels), "examples": [example["kind"] for example in examples],
        "seconds": _since(started),
    }
    return entry, examples


def _searched_refinement(program, capture, options, runner, common) -> dict[str, Any] | None:
    """Run the product's whole job with its schedule search (GPU) and keep the pair it yields, if any."""
    search_options = OptimizeOptions(
        device=options.device, trials=options.trials, search=True, search_budget=options.search_budget
    )
    try:
        outcome = optimize_target(program.source, None, TARGET, options=search_options, session=WorkerSession(runner))
    except DrtritonError:
        return None
    return refinement_example(capture, outcome.report, {**common, "dtype": capture.dtype})


def refinement_example(capture: Capture, report: Any, common: dict[str, Any]) -> dict[str, Any] | None:
    """A (default script and its time -> searched script) pair from a `drtriton optimize --search` report, or None
    when the search kept the default, or the searched program was not verified and timed faster end to end.

    report: the report dict (`drtriton optimize --search --json`, or `Outcome.report`)."""
    search = report.get("search") or {}
    if search.get("kept") != "searched" or report.get("status") != "verified":
        return None
    default_ms, searched_ms = search.get("default_ms"), search.get("searched_ms")
    searched_script = (report.get("kernel") or {}).get("schedule")
    if not (default_ms and searched_ms and searched_script) or searched_ms >= default_ms:
        return None
    default_script = capture.program.schedule
    if searched_script == default_script:
        return None
    correctness = report.get("correctness") or {}
    return {
        **common,
        "kind": "refine",
        "status": "verified",
        "verdict": {
            "verified": True, "reason": None, "detail": "", "trials": correctness.get("trials"),
            "passed": correctness.get("passed"), "interpreter": correctness.get("interpreter"),
            "device": (report.get("device") or {}).get("name"),
        },
        "times_ms": {"default": default_ms, "searched": searched_ms},
        "prompt": formats.refine_prompt(capture.graph, default_script, measured_ms=default_ms),
        "completion": formats.script_completion(searched_script),
    }


def processed_hashes(out: Path) -> set[str]:
    """Programs already in any ledger under `out` (any shard): a rerun skips them."""
    done: set[str] = set()
    for ledger in out.glob(LEDGER_GLOB):
        for line in ledger.read_text().splitlines():
            if line.strip():
                done.add(json.loads(line)["hash"])
    return done


@dataclass
class TeachSummary:
    """What one `teach` run did: programs by status, examples written, skipped and why, seconds."""

    statuses: dict[str, int] = field(default_factory=dict)
    examples: dict[str, int] = field(default_factory=dict)
    skipped_done: int = 0
    skipped_heldout: int = 0
    stopped_by_time: bool = False
    seconds: float = 0.0

    def line(self) -> str:
        statuses = ", ".join(f"{count} {status}" for status, count in sorted(self.statuses.items())) or "none"
        examples = ", ".join(f"{count} {kind}" for kind, count in sorted(self.examples.items())) or "none"
        skipped = f"; skipped {self.skipped_done} already done, {self.skipped_heldout} held-out"
        stopped = "; stopped at the time limit (run again to resume)" if self.stopped_by_time else ""
        return f"programs: {statuses}; examples: {examples}{skipped}{stopped}; {self.seconds:.0f} s"


def teach(
    programs: Iterable[SyntheticProgram],
    out: Path,
    options: TeachOptions,
    *,
    shard: Shard = Shard(),
    limit: int | None = None,
    time_limit_s: float | None = None,
    progress: Callable[[str], None] = lambda _line: None,
    cancel: threading.Event | None = None,
) -> TeachSummary:
    """Teach this shard's programs not yet in `out`, appending to its ledger and examples files as it goes
    (so a run stopped anywhere resumes where it was). Held-out programs are refused by hash.

    limit: at most this many programs this run; time_limit_s: start no program after this many seconds."""
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    summary = TeachSummary()
    done = processed_hashes(out)
    held_out = heldout_hashes()
    ledger_path = out / f"programs-{shard.suffix}.jsonl"
    examples_path = out / f"examples-{shard.suffix}.jsonl"
    taught = 0
    with LocalRunner() as runner, ledger_path.open("a") as ledger, examples_path.open("a") as examples_file:
        for program in programs:
            if not shard.holds(program.hash):
                continue
            if program.hash in held_out:
                summary.skipped_heldout += 1
                continue
            if program.hash in done:
                summary.skipped_done += 1
                continue
            if (limit is not None and taught >= limit) or (cancel is not None and cancel.is_set()):
                break
            if time_limit_s is not None and time.monotonic() - started > time_limit_s:
                summary.stopped_by_time = True
                break
            entry, examples = teach_program(program, options, runner)
            for example in examples:
                examples_file.write(json.dumps(example) + "\n")
                summary.examples[example["kind"]] = summary.examples.get(example["kind"], 0) + 1
            examples_file.flush()
            ledger.write(json.dumps(entry) + "\n")
            ledger.flush()
            done.add(program.hash)
            taught += 1
            summary.statuses[entry["status"]] = summary.statuses.get(entry["status"], 0) + 1
            progress(f"{program.hash} level {entry['level']}: {entry['status']} ({entry['seconds']} s)")
    summary.seconds = _since(started)
    return summary


def load_examples(
    directories: Iterable[Path],
    *,
    kinds: Iterable[str] = ("script", "refine"),
    statuses: Iterable[str] = ("verified",),
    split: str = "train",
) -> list[dict[str, Any]]:
    """Examples from teach outputs, one per (kind, program hash) (the first found wins), of the given kinds,
    statuses and split; refuses examples of another format version and any held-out program."""
    kinds, statuses = set(kinds), set(statuses)
    held_out = heldout_hashes()
    seen: set[tuple[str, str]] = set()
    kept = []
    for example in _examples_in(directories):
        key = (example["kind"], example["hash"])
        if example["kind"] not in kinds or example["status"] not in statuses or example["split"] != split:
            continue
        if key in seen or example["hash"] in held_out:
            continue
        if example["teacher"]["format"] != formats.FORMAT_VERSION:
            raise DrtritonError(
                f"an example of {example['hash']} is in format {example['teacher']['format']}, "
                f"this drtriton writes format {formats.FORMAT_VERSION}",
                "teach the programs again with this version (a model is served in the format it was trained on)",
            )
        seen.add(key)
        kept.append(example)
    return kept


def _examples_in(directories: Iterable[Path]) -> Iterator[dict[str, Any]]:
    for directory in directories:
        paths = sorted(Path(directory).glob(EXAMPLES_GLOB))
        if not paths:
            raise DrtritonError(f"{directory} holds no {EXAMPLES_GLOB}", "run `drtriton-train teach --out DIR` first")
        for path in paths:
            for line in path.read_text().splitlines():
                if line.strip():
                    yield json.loads(line)


def _since(started: float) -> float:
    return round(time.monotonic() - started, 2)
