"""The decoupled reward of `drtriton-train rl`: every rollout judged by the product's verifier (and, on a GPU, timed
against eager PyTorch with the same program's other verified rollouts in one worker) in a pool of worker processes
spread over this host's GPUs (or, `reward_cluster.py`, on a Ray cluster), with correctness and speed kept apart.

| rollout | correctness | speed r_s |
| --- | --- | --- |
| verified | 1.0 | log(t_torch / t_triton) on a GPU; 0.0 on the CPU (off) |
| rejected by the verifier (wrong result, crash, timeout...) | 0.0 | none |
| does not parse (the parser's message is logged) | -0.5 | none |
| rejected for cheating (`CHEATING_REASONS`), or a script that keeps every op in PyTorch | -1.0 | none |
"""

from __future__ import annotations

import abc
import json
import math
import multiprocessing
import tempfile
import threading
import time
from collections import Counter
from concurrent.futures import Future, ProcessPoolExecutor, wait
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Callable

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.local import JobLimits, LocalRunner
from drtriton_lsp.runners.protocol import GPU_LOCK_VARIABLE
from drtriton_lsp.task import Task

VERIFIED_REWARD = 1.0
REJECTED_REWARD = 0.0
UNPARSED_REWARD = -0.5
CHEATING_REWARD = -1.0
# The verifier's rejections (drtriton_lsp.engine.verify.REJECTION_REASONS) that say the answer reached for the
# reference, left the maths to PyTorch, or forged what the judge reads, rather than computing it wrongly.
CHEATING_REASONS = frozenset({
    "calls_reference",  # imports or reaches the task's own Model
    "reference_in_pytorch",  # the ATen audit: the maths ran in PyTorch, the kernels only moved data
    "kernels_have_no_effect",  # right even with every Triton launch skipped
    "no_triton_kernel",  # no kernel at all (for a script: every op kept in PyTorch)
    "no_triton_launch",  # kernels defined, none launched
    "try_except_fallback",  # a try/except that can fall back to PyTorch
    "forbidden_construct",  # code that could tamper with the checks
    "protocol_violation",  # answered the judge something other than results (forged outputs or counts)
    "state_across_calls",  # returned an earlier call's result (a cache that forges the answer)
})
# A rollout's outcome, from best to worst.
OUTCOMES = ("verified", "rejected", "unparsed", "cheating")
CORRECTNESS = {"verified": VERIFIED_REWARD, "rejected": REJECTED_REWARD, "unparsed": UNPARSED_REWARD,
               "cheating": CHEATING_REWARD}
CAPTURE_LIMITS = JobLimits(timeout_s=180)
# r_s of a verified rollout whose timing failed (a kernel too slow to time within its limit, or a worker that
# crashed): as if 100 times slower than eager, so a kernel that cannot be timed never looks as fast as PyTorch.
UNTIMED_SPEED = math.log(1 / 100)
# How often a judging still waited on says what it waits for (a step that stalls says which rollout holds it).
WAITING_REPORT_S = 60.0


@dataclass(frozen=True)
class Judging:
    """How each rollout is judged: verification trials, and how long a rollout's verification and its program's
    grouped timing may take. A job past its limit is stopped (so one slow kernel cannot hold a step, and a chunk, for
    many minutes): a verification stopped that way is a rejection (`timeout`), a timing leaves its program's verified
    rollouts untimed (UNTIMED_SPEED)."""

    trials: int = 5
    verify_timeout_s: float = 120.0
    timing_timeout_s: float = 120.0


@dataclass(frozen=True)
class RlProgram:
    """A CSP-DAG program RL trains or measures on, captured: its source, op graph, forward parameters and prompt."""

    hash: str
    level: int
    split: str
    source: str
    graph: dict[str, Any]
    forward_params: tuple[str, ...]
    prompt: str
    guards: list[dict[str, Any]] | None = None  # the capture's specialisation guards; None in older programs.jsonl


@dataclass(frozen=True)
class RolloutVerdict:
    """What the judge said of one rollout: its outcome (`OUTCOMES`), the verifier's rejection reason or the parser's
    message, and on a GPU the speed term r_s = log(eager ms / Triton ms) with the timing it came from."""

    outcome: str
    reason: str | None = None
    detail: str = ""
    speed: float | None = None
    timing: dict[str, Any] | None = None
    module: str | None = field(default=None, repr=False)  # a verified rollout's module, until it is timed

    @property
    def correctness(self) -> float:
        return CORRECTNESS[self.outcome]


# ---- the pool's side: one LocalRunner per pool process; every job it runs is a worker process of its own

# The variable the CUDA runtime reads to pick the GPUs a process sees.
VISIBLE_GPUS_VARIABLE = "CUDA_VISIBLE_DEVICES"

_runner: LocalRunner | None = None


def _start_pool_process(worker_env: dict[str, str]) -> None:
    """A JudgePool process: its worker processes get `worker_env` on top of its own (its GPU and that GPU's lock)."""
    global _runner
    _runner = LocalRunner(extra_env=worker_env)


def pool_runner() -> LocalRunner:
    """The runner of this pool process; a process no JudgePool started (a Ray worker) gets a plain one, whose workers
    see the GPU the task was given (Ray sets CUDA_VISIBLE_DEVICES in the process for each task)."""
    global _runner
    if _runner is None:
        _runner = LocalRunner()
    return _runner


def capture_job(source: str) -> dict[str, Any]:
    """Pool job: capture a KernelBench-form program (graph and forward parameters), or why it could not be."""
    from drtriton_training.teach import capture_program

    try:
        capture = capture_program(source, pool_runner(), CAPTURE_LIMITS)
    except DrtritonError as error:
        return {"error": error.message[:300]}
    return {"graph": capture.graph.to_json(), "forward_params": list(capture.forward_params), "guards": capture.guards}


_captures: dict[str, Any] = {}


def capture_of_record(program: RlProgram):
    """The program as teach captures it (its default schedule compiled), rebuilt from its captured graph: no worker."""
    from drtriton_training.teach import PREFIX, TARGET, Capture

    graph = OpGraph.from_json(program.graph)
    forward_params = list(program.forward_params)
    compiled = compile_graph(graph, prefix=PREFIX, forward_params=forward_params, has_self=True)
    task = Task(name=TARGET, kind="module", source=program.source)
    return Capture(task, graph, compiled, forward_params, program.guards)


def _capture_of(program: RlProgram):
    """`capture_of_record`, once per pool process and program."""
    if program.hash not in _captures:
        _captures[program.hash] = capture_of_record(program)
    return _captures[program.hash]


def judge_job(program: RlProgram, completion: str, kind: str, device: str, judging: Judging) -> RolloutVerdict:
    """Pool job: parse one rollout and verify the module it stands for (a verified one keeps its module for timing)."""
    from drtriton_training.evaluate import NO_KERNEL, module_of
    from drtriton_training.teach import TeachOptions, verify_module

    capture = _capture_of(program)
    module, problem = module_of(completion, capture, kind)
    if module is None:
        if problem == NO_KERNEL:
            return RolloutVerdict("cheating", "no_triton_kernel", problem)
        return RolloutVerdict("unparsed", problem[:300])
    options = TeachOptions(device=device, trials=judging.trials,
                           verify_limits=JobLimits(timeout_s=judging.verify_timeout_s))
    verdict = verify_module(capture, module, options, pool_runner())
    if not verdict.verified:
        outcome = "cheating" if verdict.reason in CHEATING_REASONS else "rejected"
        return RolloutVerdict(outcome, verdict.reason or "rejected", verdict.detail[:300])
    return RolloutVerdict("verified", module=module if device == "cuda" else None)


def time_group_job(program: RlProgram, modules: list[str], timeout_s: float) -> dict[str, Any]:
    """Pool job: eager PyTorch and each verified module of one program timed in one worker (`time_modules`: the
    product's `time_candidates`) within `timeout_s`, or why it could not be."""
    from drtriton_training.evaluate import time_modules

    return time_modules(_capture_of(program), modules, JobLimits(timeout_s=timeout_s), pool_runner())


def with_speeds(verdicts: list[RolloutVerdict], hashes: list[str],
                time_groups: Callable[[dict[str, list[str]]], dict[str, dict[str, Any]]]) -> list[RolloutVerdict]:
    """The verdicts with r_s = log(eager ms / Triton ms) for the verified ones that kept a module: each program's
    modules timed together (`time_groups` takes {program hash: modules} and gives {program hash: what
    `time_group_job` returns}), one worker per program instead of a benchmark (and a torch.compile) per rollout. A
    verified rollout left untimed says why and gets UNTIMED_SPEED."""
    groups: dict[str, list[int]] = {}
    for index, (verdict, program_hash) in enumerate(zip(verdicts, hashes)):
        if verdict.outcome == "verified" and verdict.module is not None:
            groups.setdefault(program_hash, []).append(index)
    measurements = time_groups({h: [verdicts[index].module for index in indexes] for h, indexes in groups.items()})
    timed = list(verdicts)
    for program_hash, indexes in groups.items():
        measured = measurements.get(program_hash) or {}
        reference_ms, candidate_ms = measured.get("reference_ms"), measured.get("candidate_ms") or []
        for position, index in enumerate(indexes):
            ms = candidate_ms[position] if len(candidate_ms) == len(indexes) else None
            if reference_ms and ms:
                timing = {"eager_ms": reference_ms, "triton_ms": ms, "method": "time_candidates"}
                timed[index] = replace(verdicts[index], module=None, speed=math.log(reference_ms / ms), timing=timing)
            else:
                why = measured.get("error") or "the timing worker timed nothing"
                timed[index] = replace(verdicts[index], module=None, speed=UNTIMED_SPEED,
                                       detail=f"verified, but not timed: {why}"[:300])
    return timed


def wait_reporting(futures: list[Future], labels: list[str], log: Callable[[str], None],
                   every_s: float = WAITING_REPORT_S) -> None:
    """Wait for every future; each `every_s` seconds that some are still running, log how many are done and the
    labels of those still waited on (the first three), so a judging that stalls says which rollout holds it."""
    started = time.monotonic()
    next_report = started + every_s
    pending = set(futures)
    while pending:
        _done, pending = wait(pending, timeout=max(0.0, next_report - time.monotonic()))
        if pending and time.monotonic() >= next_report:
            waiting = [label for future, label in zip(futures, labels) if future in pending]
            log(f"judging: {len(futures) - len(pending)}/{len(futures)} done after {time.monotonic() - started:.0f} s;"
                f" waiting for {'; '.join(waiting[:3])}" + (f" and {len(waiting) - 3} more" if len(waiting) > 3 else ""))
            next_report += every_s


class RewardPool(abc.ABC):
    """Where rollouts are judged, so that nothing a rollout contains ever runs in the trainer's process: `submit` runs
    a job of this module (`capture_job`, `judge_job`, `time_group_job`) elsewhere and gives its future. JudgePool runs
    them in processes of this host, RayJudgePool (reward_cluster.py) as tasks of a Ray cluster."""

    def __init__(self, device: str, log: Callable[[str], None]):
        self.device = device
        self.log = log

    @abc.abstractmethod
    def submit(self, job: Callable[..., Any], *args: Any) -> Future:
        """Run `job(*args)` in the pool; its future."""

    @abc.abstractmethod
    def close(self) -> None:
        """Stop the pool (jobs not started are cancelled)."""

    def capture(self, sources: list[str]) -> list[dict[str, Any]]:
        """What `capture_job` gives for each source, in order."""
        return [future.result() for future in [self.submit(capture_job, source) for source in sources]]

    def judge(self, jobs: list[tuple[RlProgram, str]], kind: str, judging: Judging) -> list[RolloutVerdict]:
        """Verdicts for (program, completion) pairs, in order: every rollout verified at once, then on a GPU each
        program's verified rollouts timed together, in one job (`with_speeds`)."""
        futures = [self.submit(judge_job, program, completion, kind, self.device, judging)
                   for program, completion in jobs]
        labels = [f"{program.hash} (level {program.level}): {completion.strip()[:120]!r}"
                  for program, completion in jobs]
        wait_reporting(futures, labels, self.log)
        verdicts = [future.result() for future in futures]
        if self.device != "cuda":
            return verdicts
        programs = {program.hash: program for program, _ in jobs}

        def time_groups(groups: dict[str, list[str]]) -> dict[str, dict[str, Any]]:
            timings = {h: self.submit(time_group_job, programs[h], modules, judging.timing_timeout_s)
                       for h, modules in groups.items()}
            wait_reporting(list(timings.values()), [f"timing program {h}" for h in timings], self.log)
            return {h: future.result() for h, future in timings.items()}

        return with_speeds(verdicts, [program.hash for program, _ in jobs], time_groups)

    def __enter__(self) -> RewardPool:
        return self

    def __exit__(self, *_exc_info) -> None:
        self.close()


def lane_environments(device: str, gpus: tuple[str, ...], lock_directory: Path | None) -> list[dict[str, str]]:
    """What the worker processes of each lane of a JudgePool get: on "cuda", one lane per GPU id in `gpus`, each
    seeing only its GPU and holding that GPU's lock (lock_directory/gpu{id}.lock: a timing has its GPU alone, across
    every pool given the same directory); without ids, one lane on the GPU the trainer sees (lock_directory/gpu.lock).
    On the CPU, one lane and no lock (no directory needed)."""
    if device != "cuda" or lock_directory is None:
        return [{}]
    if not gpus:
        return [{GPU_LOCK_VARIABLE: str(lock_directory / "gpu.lock")}]
    return [{VISIBLE_GPUS_VARIABLE: gpu, GPU_LOCK_VARIABLE: str(lock_directory / f"gpu{gpu}.lock")} for gpu in gpus]


class JudgePool(RewardPool):
    """Processes of this host that capture programs and judge rollouts (the product's verifier and benchmark, each job
    in a worker process of its own), in lanes: one per GPU (`lane_environments`), `workers` processes split evenly
    over them. A job goes to the lane with the fewest jobs in flight; a program's grouped timing is one job, so its
    rollouts and eager are timed together on one GPU.

    gpu_lock_directory: where the GPU locks live (the run directory, so pools of several trainer processes share
    them); None: a directory of the pool's own, removed at close."""

    def __init__(self, workers: int, device: str, *, gpus: tuple[str, ...] = (), gpu_lock_directory: Path | None = None,
                 log: Callable[[str], None] = lambda _line: None):
        super().__init__(device, log)
        self._own_lock_directory = tempfile.TemporaryDirectory(prefix="drtriton-gpu-locks-") \
            if gpu_lock_directory is None and device == "cuda" else None
        lock_directory = Path(self._own_lock_directory.name) if self._own_lock_directory else gpu_lock_directory
        self.lane_environments = lane_environments(device, gpus, lock_directory)
        lanes = len(self.lane_environments)
        if workers < lanes:
            raise DrtritonError(f"{workers} reward processes cannot cover {lanes} GPUs",
                                "give at least one reward process per GPU (--set reward_workers=N)")
        # spawned, not forked: the trainer's process holds torch's threads (and on a GPU, CUDA)
        self.lanes = [
            ProcessPoolExecutor(max_workers=workers // lanes + (lane < workers % lanes),
                                mp_context=multiprocessing.get_context("spawn"),
                                initializer=_start_pool_process, initargs=(environment,))
            for lane, environment in enumerate(self.lane_environments)
        ]
        self._in_flight = [0] * lanes
        self._in_flight_lock = threading.Lock()
        if gpus and device == "cuda":
            log(f"reward pool: {workers} processes over GPUs {', '.join(gpus)}, a lock file per GPU")

    def submit(self, job: Callable[..., Any], *args: Any) -> Future:
        with self._in_flight_lock:
            lane = self._in_flight.index(min(self._in_flight))
            self._in_flight[lane] += 1
        future = self.lanes[lane].submit(job, *args)
        future.add_done_callback(lambda _future: self._finished(lane))
        return future

    def _finished(self, lane: int) -> None:
        with self._in_flight_lock:
            self._in_flight[lane] -= 1

    def close(self) -> None:
        for lane in self.lanes:
            lane.shutdown(wait=True, cancel_futures=True)
        if self._own_lock_directory is not None:
            self._own_lock_directory.cleanup()


@dataclass
class RejectionMonitor:
    """Watches each rejection kind's share of the rollouts step by step; a share that rises by `rise` from one window
    of `window` steps to the next is the sign of a model learning to game the verifier, and is reported."""

    window: int
    rise: float
    history: list[tuple[Counter, int]] = field(default_factory=list)

    def update(self, rejections: Counter, rollouts: int) -> list[str]:
        """Record one step's rejection counts; the warnings this step raises (one per rising kind)."""
        self.history.append((rejections, rollouts))
        if len(self.history) < 2 * self.window:
            return []
        earlier, recent = self.history[-2 * self.window:-self.window], self.history[-self.window:]
        warnings = []
        for reason in sorted(set().union(*(counts for counts, _ in recent))):
            before, now = _share(earlier, reason), _share(recent, reason)
            if now - before >= self.rise:
                warnings.append(f"rejections for {reason} rose from {before:.0%} to {now:.0%} of the rollouts over "
                                f"the last {self.window} steps: read samples and rejections (reward hacking?)")
        return warnings


def _share(steps: list[tuple[Counter, int]], reason: str) -> float:
    rollouts = sum(total for _, total in steps)
    return sum(counts[reason] for counts, _ in steps) / rollouts if rollouts else 0.0


class DecoupledReward:
    """The two reward functions trl's GRPOTrainer calls (`correctness`, then `speed`, on the same rollouts), over
    verdicts of the judge pool; per step it reports outcome counts, rejection kinds, parser messages and reward
    statistics to `on_step`, and writes a sample of accepted rollouts to `samples_path`.

    programs: every program a prompt can come from, by hash; speed_on: the speed term is measured (a GPU)."""

    def __init__(
        self, programs: dict[str, RlProgram], pool: RewardPool, *, kind: str, judging: Judging, speed_on: bool,
        samples_path: Path, samples_kept: int, monitor: RejectionMonitor,
        on_step: Callable[[dict[str, Any]], None] = lambda _stats: None,
    ):
        self.programs = programs
        self.pool = pool
        self.kind = kind
        self.judging = judging
        self.speed_on = speed_on
        self.samples_path = samples_path
        self.samples_kept = samples_kept
        self.monitor = monitor
        self.on_step = on_step
        self.verdicts: dict[tuple[str, str], RolloutVerdict] = {}
        self.batch: tuple[list[str], list[RolloutVerdict]] = ([], [])

    def judge(self, hashes: list[str], completions: list[str]) -> list[RolloutVerdict]:
        """Verdicts for each rollout; a (program, completion) pair judged before is not judged again."""
        keys = list(zip(hashes, completions))
        new = list(dict.fromkeys(key for key in keys if key not in self.verdicts))
        judged = self.pool.judge([(self.programs[h], completion) for h, completion in new], self.kind, self.judging)
        self.verdicts.update(zip(new, judged))
        return [self.verdicts[key] for key in keys]

    def correctness(self, prompts, completions, program_hash, trainer_state=None, **_columns) -> list[float]:
        verdicts = self.judge(list(program_hash), list(completions))
        self.batch = (list(completions), verdicts)
        step = (trainer_state.global_step if trainer_state is not None else 0) + 1
        self._report(step, list(program_hash), list(completions), verdicts)
        return [verdict.correctness for verdict in verdicts]

    def speed(self, prompts, completions, program_hash, **_columns) -> list[float | None]:
        """r_s for verified rollouts (0.0 where the speed term is off; UNTIMED_SPEED where the timing failed), None (not
        applicable: trl leaves it out of the speed's mean) for the others."""
        judged, verdicts = self.batch
        if judged != list(completions):
            verdicts = self.judge(list(program_hash), list(completions))
        return [(verdict.speed or 0.0) if verdict.outcome == "verified" else None for verdict in verdicts]

    def _report(self, step: int, hashes: list[str], completions: list[str], verdicts: list[RolloutVerdict]) -> None:
        outcomes = Counter(verdict.outcome for verdict in verdicts)
        rejections = Counter(v.reason for v in verdicts if v.outcome in ("rejected", "cheating"))
        parse_messages = Counter(_message_kind(v.reason) for v in verdicts if v.outcome == "unparsed")
        rewards = [verdict.correctness for verdict in verdicts]
        speeds = [verdict.speed for verdict in verdicts if verdict.speed is not None]
        stats: dict[str, Any] = {
            "step": step,
            "prompt_levels": sorted({self.programs[h].level for h in hashes}),  # an advance shows a step late
            "rollouts": len(verdicts),
            "outcomes": {outcome: outcomes[outcome] for outcome in OUTCOMES},
            "rejections": dict(rejections.most_common()),
            "cheating": sum(count for reason, count in rejections.items() if reason in CHEATING_REASONS),
            "parse_failures": dict(parse_messages.most_common(5)),
            "correctness": {"mean": sum(rewards) / len(rewards), "min": min(rewards), "max": max(rewards)},
            "speed": ({"mean": sum(speeds) / len(speeds), "max": max(speeds), "timed": len(speeds)}
                      if self.speed_on and speeds else None),
            "distinct_answers": distinct_answers(hashes, completions),
            "warnings": self.monitor.update(rejections, len(verdicts)),
        }
        if stats["distinct_answers"]["mean"] < 2:
            stats["warnings"].append(
                f"a prompt's rollouts hold {stats['distinct_answers']['mean']:.1f} distinct answers on average: "
                "identical answers get identical rewards, so their group teaches nothing; raise the sampling "
                "temperature (--set temperature=...)")
        self._keep_samples(step, hashes, completions, verdicts)
        self.on_step(stats)

    def _keep_samples(self, step: int, hashes, completions, verdicts) -> None:
        """One line per step: up to `samples_kept` distinct accepted rollouts, fastest first (an empty list says the
        step had none)."""
        accepted = {(h, c): v for h, c, v in zip(hashes, completions, verdicts) if v.outcome == "verified"}
        ranked = sorted(accepted.items(), key=lambda item: -(item[1].speed or 0.0))[: self.samples_kept]
        line = {"step": step, "accepted": [
            {"hash": h, "level": self.programs[h].level, "completion": c, "speed": v.speed, "timing": v.timing}
            for (h, c), v in ranked
        ]}
        with self.samples_path.open("a") as samples:
            samples.write(json.dumps(line) + "\n")


def distinct_answers(hashes: list[str], completions: list[str]) -> dict[str, float]:
    """How many different answers the step's rollouts hold per prompt (program): the mean, and the fewest."""
    answers: dict[str, set[str]] = {}
    for program_hash, completion in zip(hashes, completions):
        answers.setdefault(program_hash, set()).add(completion)
    counts = [len(distinct) for distinct in answers.values()]
    return {"mean": sum(counts) / len(counts), "min": min(counts)}


def _message_kind(message: str | None) -> str:
    """A parser message without its line number, so that messages of one kind count together."""
    text = message or "unparsed"
    return text.split(": ", 1)[1][:80] if text.startswith("line ") and ": " in text else text[:80]

