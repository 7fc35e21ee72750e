"""Jobs: generate (`optimize_target`), verify and benchmark (the stored kernel again), each in its own thread.

The engine starts the worker processes, on this machine or on the `remote` setting's host. A job has an id and a
`$/progress` token; it is cancelled through a threading.Event that the runner watches. One job at a time per target,
whatever its kind. With the warmWorker setting, workers are started ahead for the next job on a file whose targets
are shown, and after each job.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Coroutine

from lsprotocol import types

from drtriton_lsp.engine.devices import likely_device
from drtriton_lsp.engine.report import one_line
from drtriton_lsp.engine.session import Cancelled, WorkerSession
from drtriton_lsp.engine.verify import worker_environment
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.choice import runner_for
from drtriton_lsp.runners.local import worker_python_path
from drtriton_lsp.runners.runner import Runner
from drtriton_lsp.server.results import TargetResult
from drtriton_lsp.server.settings import DEVICE_SETTING, Settings

if TYPE_CHECKING:
    from drtriton_lsp.engine.pipeline import OptimizeOptions, Outcome
    from drtriton_lsp.server.language_server import DrtritonLanguageServer

logger = logging.getLogger(__name__)
# Jobs run one at a time: each starts torch in a worker, and two at once only slow each other down.
CONCURRENT_ENGINE_RUNS = 1
QUEUE_POLL_S = 0.2


@dataclass
class Job:
    """One run of a job kind (generate | verify | benchmark) on one target. `state`: running | done | failed | cancelled."""

    id: str
    uri: str
    target_name: str
    token: str
    kind: str = "generate"
    cancel: threading.Event = field(default_factory=threading.Event)
    step: str = "starting"
    state: str = "running"
    started: float = field(default_factory=time.monotonic)
    has_progress: bool = False

    def describe(self) -> dict[str, Any]:
        return {
            "jobId": self.id,
            "kind": self.kind,
            "uri": self.uri,
            "target": self.target_name,
            "state": self.state,
            "step": self.step,
            "seconds": round(time.monotonic() - self.started, 1),
        }


@dataclass(frozen=True)
class JobInput:
    """The snapshot a job works on: the document text and version as it was when the job started (for verify
    and benchmark: as the generate job that made `outcome` read it), the settings, and the stored outcome."""

    text: str
    version: int | None
    path: str
    text_hash: str
    settings: Settings
    outcome: Outcome | None = None
    # the target's `class`/`def` line in `text` (1-based): where a failure's line is counted from
    target_line: int = 1


@dataclass(frozen=True)
class JobKind:
    """What a kind of job does in its thread: the engine call (in the job's worker session), and the step it shows
    first."""

    first_step: str
    run: Callable[[Job, JobInput, WorkerSession], Outcome]


def _engine_options(settings: Settings) -> OptimizeOptions:
    from drtriton_lsp.engine.pipeline import OptimizeOptions
    from drtriton_lsp.engine.search import SearchBudget

    # the editor runs no schedule search: the budget is the model's (drtriton.model.seconds)
    return OptimizeOptions(
        device=settings.device, trials=settings.trials, device_option=DEVICE_SETTING, model=settings.model,
        search_budget=SearchBudget(seconds=settings.model.seconds),
    )


def _generate(job: Job, job_input: JobInput, session: WorkerSession) -> Outcome:
    # The pipeline imports torch (through the compiler): paid by the first job, not at start-up.
    from drtriton_lsp.engine.pipeline import optimize_target

    options = _engine_options(job_input.settings)
    return optimize_target(job_input.text, job_input.path, job.target_name, options=options, session=session)


def _verify(job: Job, job_input: JobInput, session: WorkerSession) -> Outcome:
    from drtriton_lsp.engine.pipeline import reverify_outcome

    return reverify_outcome(job_input.outcome, options=_engine_options(job_input.settings), session=session)


def _benchmark(job: Job, job_input: JobInput, session: WorkerSession) -> Outcome:
    from drtriton_lsp.engine.pipeline import retime_outcome

    return retime_outcome(job_input.outcome, options=_engine_options(job_input.settings), session=session)


JOB_KINDS = {
    "generate": JobKind(first_step="preparing the job", run=_generate),
    "verify": JobKind(first_step="verifying the stored kernel again", run=_verify),
    "benchmark": JobKind(first_step="benchmarking the stored kernel again", run=_benchmark),
}


class JobManager:
    """Starts, tracks and cancels jobs; at most one running job per (document, target)."""

    def __init__(self, server: DrtritonLanguageServer) -> None:
        self.server = server
        self.jobs: dict[str, Job] = {}
        self._numbers = itertools.count(1)
        self._engine_slots = threading.Semaphore(CONCURRENT_ENGINE_RUNS)
        # The workers started ahead: every job kind's first call (capture, or the devices check) runs in an
        # environment that depends only on the file's folder, so one spare serves whichever job comes next;
        # a second one, for the verification, serves a generate job's next step. They run where the settings
        # say jobs run (`_warm_runner_where`): this machine, or the remote host.
        self._warm_runner_where: tuple[str, str] = ("", "")
        self._warm_runner: Runner = runner_for(*self._warm_runner_where)
        self._warm_lock = threading.Lock()  # a spare is never started after close()
        self._warming = ThreadPoolExecutor(max_workers=1, thread_name_prefix="drtriton-warm-worker")
        self._closed = False
        # (uri, target) -> the work to start once the running job on that target ends (one, the newest)
        self._follow_ups: dict[tuple[str, str], Callable[[], Coroutine[Any, Any, Any]]] = {}

    def warm_workers_for(self, path: str) -> None:
        """In the background: have workers started ahead for the next job on the file at `path` (if the
        warmWorker setting is on). Returns at once; live spares for the same folder are kept as they are."""
        if self.server.settings.warmWorker and not self._closed:
            self._warming.submit(self._warm, path)

    def stop_warm_workers(self) -> None:
        """Kill the workers started ahead, if any (the warmWorker setting was turned off)."""
        with self._warm_lock:
            self._warm_runner.close()

    def close(self) -> None:
        """Kill the workers started ahead, and start no more (the server is shutting down)."""
        with self._warm_lock:
            self._closed = True
            self._warm_runner.close()
        self._warming.shutdown(wait=False, cancel_futures=True)

    def _warm(self, path: str) -> None:
        """Workers for a generate job's first two steps: the capture, and the verification on the device the
        setting most likely resolves to (the capture step would start that one anyway, later)."""
        settings = self.server.settings
        python_path = worker_python_path(path)
        verification = worker_environment(likely_device(settings.device, bool(settings.remote)))
        with self._warm_lock:
            if self._closed or not settings.warmWorker:
                return
            where = (settings.remote, settings.remotePython)
            if where != self._warm_runner_where:  # the remote setting changed: spares elsewhere serve no job
                self._warm_runner.close()
                self._warm_runner, self._warm_runner_where = runner_for(*where), where
            self._warm_runner.prepare(python_path=python_path, method="capture", on_start=self._announce_warm)
            self._warm_runner.prepare(
                env=verification, python_path=python_path, method="verify", on_start=self._announce_warm
            )

    def _announce_warm(self, pid: int) -> None:
        self.server.call_from_thread(self.server.log, f"drtriton: worker {pid} started ahead for the next job")

    def running_for(self, uri: str, target_name: str) -> Job | None:
        for job in self.jobs.values():
            if job.state == "running" and job.uri == uri and job.target_name == target_name:
                return job
        return None

    def running(self) -> list[Job]:
        return [job for job in self.jobs.values() if job.state == "running"]

    def by_token(self, token: types.ProgressToken) -> Job | None:
        return next((job for job in self.jobs.values() if job.token == token), None)

    async def request(
        self, uri: str, target_name: str, kind: str, job_input: JobInput | str, *, quiet: bool = False
    ) -> dict[str, Any]:
        """The answer to a command that asks for a job: start it on `job_input`, or say plainly why not (a refusal
        given instead of the input, or a job already running on the target). quiet: refusals are only returned,
        not shown (background jobs started on save)."""
        if isinstance(job_input, str):
            if not quiet:
                self.server.tell(job_input, types.MessageType.Warning)
            return {"status": "refused", "message": job_input}
        running = self.running_for(uri, target_name)
        if running is not None:
            message = f"{target_name}: job {running.id} ({running.kind}) is already running ({running.step})"
            if not quiet:
                self.server.tell(message)
            return {"status": "already running", "jobId": running.id, "message": message}
        job = await self.start(uri, target_name, kind, job_input)
        return {"status": "started", "jobId": job.id, "token": job.token}

    async def start(self, uri: str, target_name: str, kind: str, job_input: JobInput) -> Job:
        """Register a job, create its progress token, and start its thread. The caller checked it can run."""
        number = next(self._numbers)
        job = Job(id=str(number), uri=uri, target_name=target_name, token=f"drtriton-job-{number}", kind=kind)
        job.step = JOB_KINDS[kind].first_step
        self.jobs[job.id] = job
        if self.server.client_supports("window", "work_done_progress"):
            try:
                await self.server.work_done_progress.create_async(job.token)
                job.has_progress = True
            except Exception as refusal:  # the editor may refuse a progress token; the job runs anyway
                self.server.log(f"drtriton: no progress bar for job {job.id}: {refusal}")
        if job.has_progress:
            self.server.work_done_progress.begin(
                job.token,
                # Editors' status lines read the target from the title: the kind is in the message.
                types.WorkDoneProgressBegin(title=f"drtriton: {target_name}", message=job.step, cancellable=True),
            )
        self.server.refresh_result_views()
        threading.Thread(target=self._run, args=(job, job_input), name=f"drtriton-job-{job.id}", daemon=True).start()
        return job

    def after_running_job(self, uri: str, target_name: str, work: Callable[[], Coroutine[Any, Any, Any]]) -> None:
        """Start `work` once the job running on the target ends; a later call replaces an earlier one (only the
        newest text is worth a job)."""
        self._follow_ups[(uri, target_name)] = work

    def cancel(self, job: Job) -> None:
        job.cancel.set()

    def cancel_all(self) -> None:
        for job in self.running():
            job.cancel.set()

    def _run(self, job: Job, job_input: JobInput) -> None:
        """The job's thread: wait for an engine slot, run the job's kind, hand the outcome to the event loop.

        A failed generate stores its error as the target's result; a failed verify or benchmark leaves the
        stored result as it was (the kernel it worked on is unchanged)."""
        try:
            if not self._wait_for_slot(job):
                self.server.call_from_thread(self._finish, job, "cancelled", None, "cancelled while queued")
                return
            try:
                # Each job owns its runner; closing it kills a worker started ahead for a step that did not come.
                with runner_for(job_input.settings.remote, job_input.settings.remotePython) as runner:
                    runner.take_spare_from(self._warm_runner)
                    session = WorkerSession.for_file(
                        runner,
                        job_input.path,
                        progress=lambda step: self.server.call_from_thread(self._report, job, step),
                        cancel=job.cancel,
                    )
                    outcome = JOB_KINDS[job.kind].run(job, job_input, session)
            finally:
                self._engine_slots.release()
                self._warm(job_input.path)  # in this thread: started before the editor hears the job ended
        except Cancelled:
            self.server.call_from_thread(self._finish, job, "cancelled", None, "cancelled; the worker was stopped")
        except DrtritonError as problem:
            result = None
            if job_input.outcome is None:
                here = problem.line is not None and problem.path in (None, job_input.path)
                offset = problem.line - job_input.target_line if here else None
                result = self._result(job, job_input, None, problem.message, problem.hint, offset)
            self.server.call_from_thread(self._finish, job, "failed", result, problem.message, problem.hint)
        except Exception as bug:  # a drtriton bug must end this job only, never the server
            logger.exception("job %s failed", job.id)
            message = f"internal error ({type(bug).__name__}: {bug}); please report it with the server log"
            result = self._result(job, job_input, None, message) if job_input.outcome is None else None
            self.server.call_from_thread(self._finish, job, "failed", result, message)
        else:
            if job.cancel.is_set():
                self.server.call_from_thread(self._finish, job, "cancelled", None, "cancelled")
            else:
                result = self._result(job, job_input, outcome, "")
                self.server.call_from_thread(self._finish, job, "done", result, one_line(outcome.report))

    def _wait_for_slot(self, job: Job) -> bool:
        announced = False
        while not self._engine_slots.acquire(timeout=QUEUE_POLL_S):
            if job.cancel.is_set():
                return False
            if not announced:
                self.server.call_from_thread(self._report, job, "queued behind another drtriton job")
                announced = True
        if job.cancel.is_set():
            self._engine_slots.release()
            return False
        return True

    @staticmethod
    def _result(
        job: Job, job_input: JobInput, outcome, error: str, hint: str = "", problem_offset: int | None = None
    ) -> TargetResult:
        return TargetResult(
            uri=job.uri,
            target_name=job.target_name,
            text_hash=job_input.text_hash,
            source_text=job_input.text,
            source_version=job_input.version,
            outcome=outcome,
            error=error,
            hint=hint,
            problem_offset=problem_offset,
        )

    def _report(self, job: Job, step: str) -> None:
        if job.state != "running":
            return
        job.step = step
        if job.has_progress:
            self.server.work_done_progress.report(job.token, types.WorkDoneProgressReport(message=step))

    def _finish(self, job: Job, state: str, result: TargetResult | None, summary: str, hint: str = "") -> None:
        """On the event loop: record the result, tell the user, update diagnostics and lenses, then end the progress."""
        job.state = state
        job.step = summary
        if result is not None:
            self.server.results.put(result)
        if state == "failed":
            self.server.tell(f"{job.target_name}: {summary}", types.MessageType.Error)
            if hint:
                self.server.log(f"drtriton: {job.target_name}: {summary}\n{hint}", types.MessageType.Error)
        elif state == "cancelled":
            self.server.tell(f"{job.target_name}: job {job.id} {summary}")
        else:
            self.server.tell(summary)
        self.server.publish_diagnostics(job.uri)
        self.server.refresh_result_views()
        follow_up = self._follow_ups.pop((job.uri, job.target_name), None)
        if follow_up is not None:
            self.server.in_background(follow_up())
        if job.has_progress:
            # Last, so that a client which sees the end has already been sent the message and diagnostics.
            self.server.work_done_progress.end(job.token, types.WorkDoneProgressEnd(message=summary))
