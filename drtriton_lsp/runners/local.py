"""Run one job in a fresh local worker process, watched for time, memory and cancellation.

Each job gets its own `python -m drtriton_lsp.worker.main`, so a crash or hang ends only that process (a named
`JobFailure`); a "spare" started ahead (`prepare`) imports torch while an earlier step runs, then serves one job.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
import weakref
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import psutil

from drtriton_lsp.errors import DrtritonError, WorkerError
from drtriton_lsp.runners import lifetime, protocol
from drtriton_lsp.runners.runner import JobFailure, JobLimits, Runner

WORKER_MODULE = "drtriton_lsp.worker.main"
WATCH_INTERVAL_S = 0.1
STDERR_LINES_KEPT = 60
# Request ids on a worker's stdin: a spare's preload, then the job, then shutdown.
PRELOAD_ID, JOB_ID, SHUTDOWN_ID = 0, 1, 2


# The command that starts a worker and its whole environment: a spare serves only a job with the same key.
EnvironmentKey = tuple[tuple[str, ...], frozenset]


@dataclass
class _Worker:
    """A started worker process; its stderr is read from the start, so a full pipe never blocks it."""

    process: subprocess.Popen
    key: EnvironmentKey
    stderr_lines: deque[str]
    stderr_reader: threading.Thread
    is_spare: bool = False  # started ahead of its job: its first request is `preload`

    @classmethod
    def start(cls, key: EnvironmentKey, *, spare: bool = False, preload_for: str | None = None) -> _Worker:
        command, environment = key
        # In its own process group (a kill takes every child with it), and tied to this process: it ends when
        # this process ends, however that happens (see runners.lifetime).
        process = lifetime.start_child(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=dict(environment),
        )
        stderr_lines: deque[str] = deque(maxlen=STDERR_LINES_KEPT)
        stderr_reader = threading.Thread(target=_drain, args=(process.stderr, stderr_lines), daemon=True)
        stderr_reader.start()
        worker = cls(process, key, stderr_lines, stderr_reader, is_spare=spare)
        if spare:
            worker.send(PRELOAD_ID, "preload", {"method": preload_for} if preload_for else {})
        return worker

    def send(self, request_id: int, method: str, params: dict[str, Any]) -> None:
        self._write(protocol.request(request_id, method, params))

    def notify(self, method: str, params: dict[str, Any]) -> None:
        self._write(protocol.notification(method, params))

    def _write(self, message: dict[str, Any]) -> None:
        try:
            protocol.write_message(self.process.stdin, message)
        except (BrokenPipeError, OSError):
            pass  # the worker died; reading its answer finds out, and its exit status says why

    def kill(self) -> None:
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.process.wait()


# Where a spare is kept: its environment, and the job method it was started for (None: any job).
_SpareSlot = tuple[EnvironmentKey, str | None]


class _Spares:
    """The runner's spare workers, at most one per environment and method, shared by the threads that call
    the runner and by its finalizer. Two steps of one job may share an environment (a capture, then the
    verification): each step needs its own worker, so each gets its own spare."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spares: dict[_SpareSlot, _Worker] = {}

    def fill(self, key: EnvironmentKey, method: str | None, on_start: Callable[[int], None] | None) -> None:
        """Keep a live spare for `key` and `method` (one that died idle is reaped and replaced).
        on_start: called with a new spare's pid, under the lock (so calls come in start order)."""
        with self._lock:
            spare = self._spares.get((key, method))
            if spare is not None and spare.process.poll() is None:
                return
            if spare is not None:
                spare.kill()
            self._spares[(key, method)] = _Worker.start(key, spare=True, preload_for=method)
            if on_start is not None:
                on_start(self._spares[(key, method)].process.pid)

    def move_to(self, other: _Spares) -> None:
        """Hand every spare to `other` (killing any it held in the same slot)."""
        with self._lock:
            spares, self._spares = self._spares, {}
        for slot, spare in spares.items():
            with other._lock:
                replaced, other._spares[slot] = other._spares.get(slot), spare
            if replaced is not None:
                replaced.kill()

    def take(self, key: EnvironmentKey, method: str) -> _Worker | None:
        """A live spare for `key`: the one started for `method` if there is one, else one started for another
        (any spare has run no job). One that died idle (a crash, the OOM killer) is reaped and never used.
        Spares for other environments stay until taken or emptied."""
        with self._lock:
            slot = (key, method) if (key, method) in self._spares else next((s for s in self._spares if s[0] == key), None)
            spare = self._spares.pop(slot) if slot is not None else None
        if spare is not None and spare.process.poll() is not None:
            spare.kill()
            return None
        return spare

    def empty(self) -> None:
        """Kill every spare."""
        with self._lock:
            spares, self._spares = list(self._spares.values()), {}
        for spare in spares:
            spare.kill()


def worker_python_path(path: str | None) -> list[str] | None:
    """The user's folder first on the worker's path, so the task can import its neighbours."""
    return [str(Path(path).resolve().parent)] if path else None


class _CallsInFlight:
    """The watches of a runner's calls in progress, so that closing the runner (from another thread, or at the
    interpreter's exit) stops their workers too."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._watches: set[_Watch] = set()

    @contextmanager
    def watching(self, watch: _Watch) -> Iterator[None]:
        with self._lock:
            self._watches.add(watch)
        try:
            yield
        finally:
            with self._lock:
                self._watches.discard(watch)

    def stop_all(self) -> None:
        with self._lock:
            watches = list(self._watches)
        for watch in watches:
            watch.kill_now("the runner was closed")


def _kill_workers(spares: _Spares, calls: _CallsInFlight) -> None:
    calls.stop_all()
    spares.empty()


class _DiedBeforeUse(Exception):
    """A spare ended before it read its job (no answer even to its preload): the job never ran."""


@dataclass
class LocalRunner:
    """Starts workers with this interpreter; `extra_env` and `python_path` shape their environment.

    A spare's limits (time, memory) and cancellation apply from when its job is handed over. Close the
    runner (or use it as a context manager) to kill the spares no job took; any left over, and the workers
    of calls still in flight, are also killed when the runner is garbage-collected or the interpreter exits.

    Another runner whose workers speak the same protocol through a local process (ssh) subclasses it and
    overrides the hooks below the public methods: how a worker starts, and how a job without an answer failed.
    """

    python: str = sys.executable
    extra_env: dict[str, str] = field(default_factory=dict)
    _spares: _Spares = field(default_factory=_Spares, init=False, repr=False, compare=False)
    _calls: _CallsInFlight = field(default_factory=_CallsInFlight, init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        # The finalizer holds the workers' holders, not the runner, so it does not keep the runner alive.
        weakref.finalize(self, _kill_workers, self._spares, self._calls)

    @property
    def host(self) -> str | None:
        """None: the workers run on this machine."""
        return None

    def __enter__(self) -> LocalRunner:
        return self

    def __exit__(self, *_exc_info) -> None:
        self.close()

    def close(self) -> None:
        """Kill the runner's workers: the spares, and those of calls in flight in other threads (a language
        server shutting down), which raise JobFailure "cancelled". The runner stays usable: later calls start
        workers as needed."""
        _kill_workers(self._spares, self._calls)

    def prepare(
        self,
        *,
        env: dict[str, str | None] | None = None,
        python_path: list[str] | None = None,
        method: str | None = None,
        on_start: Callable[[int], None] | None = None,
    ) -> None:
        """Start a worker now for the next `call` with this `env` and `python_path`, so that its imports (and
        its CUDA context, where its jobs use CUDA) are done when that call comes. A runner keeps at most one
        spare per environment and method: a live one already started for them is kept. method: the job it is
        for, when known, so it also does what only that job needs (see the worker's `preload`); a call for
        another method takes it when no spare was started for its own. on_start: called with the pid of a
        worker this starts."""
        self._spares.fill(self._environment_key(env, python_path), method, on_start)

    def take_spare_from(self, other: Runner) -> None:
        """Take over `other`'s spare workers (started ahead, say, while no job was running); this runner's
        next call for a spare's environment uses it, and closing this runner kills those unused. A spare
        started for another place (this machine, a remote host) never matches a job here, and ends at close."""
        if isinstance(other, LocalRunner):
            other._spares.move_to(self._spares)

    def call(
        self,
        method: str,
        params: dict[str, Any],
        *,
        limits: JobLimits | None = None,
        env: dict[str, str | None] | None = None,
        python_path: list[str] | None = None,
        on_progress: Callable[[str], None] | None = None,
        cancel: threading.Event | None = None,
        prepare_next: dict[str, str | None] | None = None,
        prepare_next_for: str | None = None,
    ) -> Any:
        """Run `method` in a new worker and return its result, or raise JobFailure / DrtritonError.

        The worker is the spare if one was prepared for this environment. prepare_next: the `env` of a
        job known to follow (with this `python_path`), whose worker is then started while this job runs;
        prepare_next_for: that job's method, when known (see `prepare`).
        """
        limits = limits or JobLimits()
        key = self._environment_key(env, python_path)
        worker = self._spares.take(key, method)
        if worker is None:
            if on_progress is not None:
                on_progress("starting a worker process (it imports torch: a few seconds)")
            worker = _Worker.start(key)
        if prepare_next is not None:
            self.prepare(env=prepare_next, python_path=python_path, method=prepare_next_for)
        try:
            return self._run_job(worker, method, params, limits, on_progress, cancel)
        except _DiedBeforeUse:
            return self._run_job(_Worker.start(key), method, params, limits, on_progress, cancel)

    # Hooks for a runner whose workers run elsewhere.

    def _environment_key(self, env: dict[str, str | None] | None, python_path: list[str] | None) -> EnvironmentKey:
        """The command and the whole environment a worker gets: a spare serves only a job with the same key."""
        process_env = dict(os.environ)
        process_env.update(self.extra_env)
        for name, value in (env or {}).items():
            if value is None:
                process_env.pop(name, None)  # None removes a variable inherited from the caller
            else:
                process_env[name] = value
        process_env["PYTHONUNBUFFERED"] = "1"
        if python_path:
            existing = process_env.get("PYTHONPATH")
            process_env["PYTHONPATH"] = os.pathsep.join(python_path + ([existing] if existing else []))
        return (self.python, "-m", WORKER_MODULE), frozenset(process_env.items())

    def _limits_for_the_worker_side(self, limits: JobLimits) -> dict[str, Any] | None:
        """The limits the worker's side enforces itself, sent before the job (`protocol.SET_LIMITS`): none here,
        where `_Watch` enforces them all."""
        return None

    def _measures_memory(self) -> bool:
        """Whether `_Watch` can measure the worker's memory: the process it watches is the worker."""
        return True

    def _failure_without_answer(
        self, returncode: int | None, stderr_tail: str, exit_report: dict[str, Any] | None
    ) -> JobFailure:
        """Why a worker that started its job ended without answering, from its exit status; exit_report: the
        `worker_exit` notification a remote worker's host sends (None here)."""
        return JobFailure("crashed", describe_exit(returncode), stderr_tail)

    def _run_job(
        self,
        worker: _Worker,
        method: str,
        params: dict[str, Any],
        limits: JobLimits,
        on_progress: Callable[[str], None] | None,
        cancel: threading.Event | None,
    ) -> Any:
        """Hand `method` to the worker and watch it from now on (a spare's start-up counts for no limit)."""
        process = worker.process
        watch = _Watch(process, limits, cancel, measure_memory=self._measures_memory())
        watcher = threading.Thread(target=watch.run, daemon=True)
        watcher.start()
        response = None
        exit_report = None
        preload_answered = False
        try:
            with self._calls.watching(watch):  # until the worker's output ends: it has answered, or it is gone
                # A spare still preloading reads the job when it is done: a large job may wait here until then.
                worker_side_limits = self._limits_for_the_worker_side(limits)
                if worker_side_limits is not None:
                    worker.notify(protocol.SET_LIMITS, worker_side_limits)
                worker.send(JOB_ID, method, params)
                worker.send(SHUTDOWN_ID, "shutdown", {})
                while True:
                    message = protocol.read_message(process.stdout)
                    if message is None:
                        break
                    if message.get("method") == "progress" and on_progress is not None:
                        on_progress(message["params"]["message"])
                    elif message.get("method") == protocol.WORKER_EXIT:
                        exit_report = message["params"]
                    elif message.get("id") == PRELOAD_ID:
                        preload_answered = True  # its content (even an error) is of no use: the job itself decides
                    elif message.get("id") == JOB_ID:
                        response = message
        except BaseException:
            watch.kill_now("interrupted")  # Ctrl-C or an error in the caller: never leave a worker behind
            raise
        process.wait()
        watch.stop()
        worker.stderr_reader.join(timeout=5)
        stderr_tail = "".join(worker.stderr_lines)
        if watch.verdict is not None:
            raise JobFailure(watch.verdict, watch.detail, stderr_tail)
        if response is None:
            if worker.is_spare and not preload_answered:
                raise _DiedBeforeUse()  # requests are served in order: without a preload answer, the job never started
            raise self._failure_without_answer(process.returncode, stderr_tail, exit_report)
        if "error" in response:
            error = response["error"]
            if error["code"] == protocol.USER_ERROR:
                data = error.get("data") or {}
                raise DrtritonError(
                    data.get("message", error["message"]),
                    data.get("hint", ""),
                    path=data.get("path"),
                    line=data.get("line"),
                )
            detail = (error.get("data") or {}).get("traceback", error["message"])
            raise WorkerError(f"the worker failed in {method}: {error['message']}", detail)
        return response["result"]


class _Watch:
    """Kills the worker's process group on timeout, memory overuse or cancellation."""

    def __init__(
        self,
        process: subprocess.Popen,
        limits: JobLimits,
        cancel: threading.Event | None,
        *,
        measure_memory: bool = True,
    ):
        self.process = process
        self.limits = limits
        self.cancel = cancel
        self.measure_memory = measure_memory
        self.verdict: str | None = None
        self.detail = ""
        self._stopped = threading.Event()

    def stop(self) -> None:
        self._stopped.set()

    def kill_now(self, detail: str) -> None:
        self.stop()
        self._kill("cancelled", detail)

    def run(self) -> None:
        started = time.monotonic()
        memory_cap = self.limits.memory_cap()
        while not self._stopped.wait(WATCH_INTERVAL_S):
            if self.process.poll() is not None:
                return
            if self.cancel is not None and self.cancel.is_set():
                self._kill("cancelled", "cancelled by the user")
                return
            elapsed = time.monotonic() - started
            if elapsed > self.limits.timeout_s:
                self._kill("timeout", f"no result after {self.limits.timeout_s:.0f} s (a hang, or a job too large)")
                return
            if not self.measure_memory:
                continue
            resident = tree_resident_bytes(self.process.pid)
            if resident > memory_cap:
                self._kill("memory_limit", memory_limit_detail(resident, memory_cap))
                return

    def _kill(self, verdict: str, detail: str) -> None:
        self.verdict = verdict
        self.detail = detail
        try:
            os.killpg(self.process.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def memory_limit_detail(resident: int, limit: int) -> str:
    return f"used {resident / 1024**3:.1f} GiB, over the {limit / 1024**3:.1f} GiB limit"


def tree_resident_bytes(pid: int) -> int:
    """The resident memory of process `pid` and every process below it (0 once it has ended)."""
    try:
        parent = psutil.Process(pid)
        processes = [parent] + parent.children(recursive=True)
    except psutil.Error:
        return 0
    total = 0
    for process in processes:
        try:
            total += process.memory_info().rss
        except psutil.Error:
            continue
    return total


def _drain(stream, sink: deque[str]) -> None:
    for line in stream:
        sink.append(line)


def describe_exit(returncode: int | None, process: str = "the worker process") -> str:
    """Why `process` ended without answering: the signal that killed it (with a hint for SIGSEGV), or its status."""
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = " (an out-of-bounds memory access in a kernel?)" if name == "SIGSEGV" else ""
        return f"{process} was killed by {name}{hint}"
    return f"{process} exited with status {returncode} without answering"
