"""`drtriton bench --cluster ADDRESS`: each problem is a Ray task on a node of the cluster, holding a whole GPU there
(or one CPU on a CPU cluster), with the pipeline's worker processes started on that node as on this machine.

Problems travel by value (their source: a problem that imports its neighbours must run without --cluster). Progress
comes back through one inbox actor; a task whose worker or node dies is run again elsewhere, and its record says how
many attempts it took. The caller's Ctrl-C cancels every task still running.
"""

from __future__ import annotations

import tempfile
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from drtriton_lsp.bench.suite import build_record
from drtriton_lsp.engine.session import Cancelled
from drtriton_lsp.runners.cluster import TASK_RETRIES, node_name, task_resources

Progress = Callable[[str], None]
# How often the caller looks at its tasks (finished? cancelled?) and at the inbox of their progress.
POLL_S = 0.25
# The problems submitted to Ray at once: Ray queues those its GPUs cannot take yet, so this only bounds the threads
# waiting on them here.
MOST_TASKS_AT_ONCE = 256


def describe_cluster_device(ray: ModuleType, want_gpu: bool, measure_copy: bool) -> dict[str, Any]:
    """What a node of the cluster sees (the worker's `capabilities`) and, on a GPU with `measure_copy`, its copy
    bandwidth: run as one task on a GPU node when `want_gpu`, else on any node."""
    task = ray.remote(_describe_node).options(**task_resources("cuda" if want_gpu else "cpu"), max_retries=TASK_RETRIES)
    return ray.get(task.remote(measure_copy))


def _describe_node(measure_copy: bool) -> dict[str, Any]:
    """Ray task: this node's capabilities, and the copy bandwidth of its GPU when asked and there is one."""
    from drtriton_lsp.bench.suite import CEILING_LIMITS
    from drtriton_lsp.runners.local import LocalRunner

    with LocalRunner() as runner:
        devices = runner.call("capabilities", {})
        copy = None
        if measure_copy and devices["cuda_available"]:
            copy = runner.call("ceilings", {"copy": True}, limits=CEILING_LIMITS)["copy"]
    return {"devices": devices, "copy": copy, "node": node_name()}


def _solve_on_node(
    source: str,
    name: str,
    category: str,
    options: Any,
    copy_ceiling: dict[str, Any] | None,
    inbox: Any,
) -> dict[str, Any]:
    """Ray task: run one problem (its file rebuilt from `source` in a scratch folder) on this node's GPU or CPU,
    posting its start (where it runs) and its progress to `inbox`."""
    import ray

    from drtriton_lsp.bench.suite import Problem, run_problem

    where = node_name()
    ray.get(inbox.post.remote(name, "started", where))  # counted before any work, so a retry is seen as one
    with tempfile.TemporaryDirectory(prefix="drtriton-problem-") as directory:
        path = Path(directory) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
        record = run_problem(
            Problem(path, name, category), options, copy_ceiling,
            lambda message: inbox.post.remote(name, "progress", message),
        )
    record["placed_on"] = where
    return record


class _Inbox:
    """Ray actor: the messages the running tasks post (problem, kind, text), taken by the caller in order."""

    def __init__(self) -> None:
        self.messages: list[tuple[str, str, str]] = []

    def post(self, problem: str, kind: str, text: str) -> None:
        self.messages.append((problem, kind, text))

    def take(self) -> list[tuple[str, str, str]]:
        taken, self.messages = self.messages, []
        return taken


class RayPlaces:
    """A Ray cluster as the places of a bench: every problem a task with its own GPU (or CPU)."""

    def __init__(self, ray: ModuleType, address: str, device: str, problems: int):
        self.ray = ray
        self.address = address
        self.device = device
        self.concurrency = max(1, min(problems, MOST_TASKS_AT_ONCE))
        self._task = ray.remote(_solve_on_node).options(**task_resources(device), max_retries=TASK_RETRIES)
        self._inbox = ray.remote(num_cpus=0)(_Inbox).remote()
        self._listeners: dict[str, Progress] = {}
        self._starts: dict[str, list[str]] = {}
        self._lock = threading.Lock()
        self._delivered_at = 0.0

    def describe(self) -> dict[str, Any]:
        """How the run was placed, as results.json records it."""
        resources = self.ray.cluster_resources()
        return {
            "cluster": self.address,
            "nodes": sum(1 for node in self.ray.nodes() if node.get("Alive")),
            "gpus": int(resources.get("GPU", 0)),
            "cpus": int(resources.get("CPU", 0)),
        }

    def _deliver(self, *, now: bool = False) -> None:
        """Pass the inbox's messages to the problems they are about, at most once per POLL_S whichever problem's
        thread asks (one asks every POLL_S), or at once with `now` (a finished task's own messages)."""
        if not self._lock.acquire(blocking=now):
            return  # another thread is delivering
        try:
            if not now and time.monotonic() - self._delivered_at < POLL_S:
                return
            self._delivered_at = time.monotonic()
            for problem, kind, text in self.ray.get(self._inbox.take.remote()):
                if kind == "started":
                    self._starts.setdefault(problem, []).append(text)
                    text = f"started on {text}" + (
                        f" (attempt {len(self._starts[problem])})" if len(self._starts[problem]) > 1 else ""
                    )
                listener = self._listeners.get(problem)
                if listener is not None:
                    listener(text)
        finally:
            self._lock.release()

    def solve(
        self,
        problem: Any,
        options: Any,
        copy_ceiling: dict[str, Any] | None,
        progress: Progress,
        cancel: threading.Event,
    ) -> dict[str, Any]:
        """Run one problem as a Ray task and wait for its record; a task that failed on every attempt is recorded as
        a `cluster_error`. On `cancel` the task is cancelled and Cancelled raised (no record)."""
        with self._lock:
            self._listeners[problem.name] = progress
        started = time.monotonic()
        source = problem.path.read_text(encoding="utf-8")
        reference = self._task.remote(source, problem.name, problem.category, options, copy_ceiling, self._inbox)
        progress("waiting for a " + ("GPU" if self.device == "cuda" else "CPU") + " of the cluster")
        try:
            while True:
                done, _ = self.ray.wait([reference], timeout=POLL_S)
                self._deliver(now=bool(done))  # a finished task's start is counted before its record is read
                if done:
                    break
                if cancel.is_set():
                    self.ray.cancel(reference, force=True)
                    raise Cancelled()
            try:
                record = self.ray.get(reference)
            except self.ray.exceptions.RayError as error:
                attempts = len(self._starts.get(problem.name, []))
                message = (
                    f"the task failed on the cluster after {attempts} attempt{'s' if attempts != 1 else ''}: "
                    f"{type(error).__name__}: {str(error)[:500]} (see `ray status` and the Ray logs of its node)"
                )
                record = build_record(
                    problem, report=None, failure=("cluster_error", message), dtypes=[], work=None,
                    copy_ceiling=copy_ceiling, library=None, seconds=time.monotonic() - started,
                )
        finally:
            with self._lock:
                self._listeners.pop(problem.name, None)
        record["attempts"] = len(self._starts.get(problem.name, [])) or 1
        return record
