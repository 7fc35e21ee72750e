"""Generate jobs: each runs `optimize_target` in its own thread (the engine starts the worker processes).

A job has an id and a `$/progress` token; it is cancelled through a threading.Event that the runner watches.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from drtriton_lsp.engine.report import one_line
from drtriton_lsp.engine.verify import Cancelled
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.local import LocalRunner
from drtriton_lsp.server.results import TargetResult
from drtriton_lsp.server.settings import Settings

if TYPE_CHECKING:
    from drtriton_lsp.server.language_server import DrtritonLanguageServer

logger = logging.getLogger(__name__)
# Jobs run one at a time: each starts torch in a worker, and two at once only slow each other down.
CONCURRENT_ENGINE_RUNS = 1
QUEUE_POLL_S = 0.2


@dataclass
class Job:
    """One generate run for one target. `state`: running | done | failed | cancelled."""

    id: str
    uri: str
    target_name: str
    token: str
    cancel: threading.Event = field(default_factory=threading.Event)
    step: str = "starting"
    state: str = "running"
    started: float = field(default_factory=time.monotonic)
    has_progress: bool = False

    def describe(self) -> dict[str, Any]:
        return {
            "jobId": self.id,
            "uri": self.uri,
            "target": self.target_name,
            "state": self.state,
            "step": self.step,
            "seconds": round(time.monotonic() - self.started, 1),
        }


@dataclass(frozen=True)
class JobInput:
    """The snapshot a job works on: the document text and version as it was when the job started."""

    text: str
    version: int | None
    path: str
    text_hash: str
    settings: Settings


class JobManager:
    """Starts, tracks and cancels jobs; at most one running job per (document, target)."""

    def __init__(self, server: DrtritonLanguageServer) -> None:
        self.server = server
        self.jobs: dict[str, Job] = {}
        self._numbers = itertools.count(1)
        self._engine_slots = threading.Semaphore(CONCURRENT_ENGINE_RUNS)

    def running_for(self, uri: str, target_name: str) -> Job | None:
        for job in self.jobs.values():
            if job.state == "running" and job.uri == uri and job.target_name == target_name:
                return job
        return None

    def running(self) -> list[Job]:
        return [job for job in self.jobs.values() if job.state == "running"]

    def by_token(self, token: types.ProgressToken) -> Job | None:
        return next((job for job in self.jobs.values() if job.token == token), None)

    async def start(self, uri: str, target_name: str, job_input: JobInput) -> Job:
        """Register a job, create its progress token, and start its thread. The caller checked it can run."""
        number = next(self._numbers)
        job = Job(id=str(number), uri=uri, target_name=target_name, token=f"drtriton-job-{number}")
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
                types.WorkDoneProgressBegin(
                    title=f"drtriton: {target_name}", message="starting", cancellable=True
                ),
            )
        self.server.refresh_code_lenses()
        threading.Thread(target=self._run, args=(job, job_input), name=f"drtriton-job-{job.id}", daemon=True).start()
        return job

    def cancel(self, job: Job) -> None:
        job.cancel.set()

    def cancel_all(self) -> None:
        for job in self.running():
            job.cancel.set()

    def _run(self, job: Job, job_input: JobInput) -> None:
        """The job's thread: wait for an engine slot, run the main job, hand the outcome to the event loop."""
        try:
            if not self._wait_for_slot(job):
                self.server.call_from_thread(self._finish, job, "cancelled", None, "cancelled while queued")
                return
            try:
                # The pipeline imports torch (through the compiler): paid by the first job, not at start-up.
                from drtriton_lsp.engine.pipeline import OptimizeOptions, optimize_target

                outcome = optimize_target(
                    job_input.text,
                    job_input.path,
                    job.target_name,
                    options=OptimizeOptions(device=job_input.settings.device, trials=job_input.settings.trials),
                    runner=LocalRunner(),
                    progress=lambda step: self.server.call_from_thread(self._report, job, step),
                    cancel=job.cancel,
                )
            finally:
                self._engine_slots.release()
        except Cancelled:
            self.server.call_from_thread(self._finish, job, "cancelled", None, "cancelled; the worker was stopped")
        except DrtritonError as problem:
            result = self._result(job, job_input, None, problem.message)
            self.server.call_from_thread(self._finish, job, "failed", result, problem.message, problem.hint)
        except Exception as bug:  # a drtriton bug must end this job only, never the server
            logger.exception("job %s failed", job.id)
            message = f"internal error ({type(bug).__name__}: {bug}); please report it with the server log"
            self.server.call_from_thread(self._finish, job, "failed", self._result(job, job_input, None, message), message)
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
    def _result(job: Job, job_input: JobInput, outcome, error: str) -> TargetResult:
        return TargetResult(
            uri=job.uri,
            target_name=job.target_name,
            text_hash=job_input.text_hash,
            source_text=job_input.text,
            source_version=job_input.version,
            outcome=outcome,
            error=error,
        )

    def _report(self, job: Job, step: str) -> None:
        if job.state != "running":
            return
        job.step = step
        if job.has_progress:
            self.server.work_done_progress.report(job.token, types.WorkDoneProgressReport(message=step))

    def _finish(self, job: Job, state: str, result: TargetResult | None, summary: str, hint: str = "") -> None:
        """On the event loop: record the result, end the progress, update lenses and diagnostics, tell the user."""
        job.state = state
        job.step = summary
        if result is not None:
            self.server.results.put(result)
        if job.has_progress:
            self.server.work_done_progress.end(job.token, types.WorkDoneProgressEnd(message=summary))
        if state == "failed":
            self.server.tell(f"{job.target_name}: {summary}", types.MessageType.Error)
            if hint:
                self.server.log(f"drtriton: {job.target_name}: {summary}\n{hint}", types.MessageType.Error)
        elif state == "cancelled":
            self.server.tell(f"{job.target_name}: job {job.id} {summary}")
        else:
            self.server.tell(summary)
        self.server.publish_diagnostics(job.uri)
        self.server.refresh_code_lenses()
