"""The reward pool on a Ray cluster (`drtriton-train rl --cluster ADDRESS`): JudgePool's jobs, each a Ray task on a
node where drtriton is installed, with the program sent by value and the verdict back in the trainer's process.

A task asks for a whole GPU on "cuda" (its verification or timing has the GPU alone; Ray sets CUDA_VISIBLE_DEVICES for
it, and its worker processes inherit it), else one CPU; Ray runs it again when its worker process or node dies.
"""

from __future__ import annotations

import contextlib
from concurrent.futures import Future
from typing import Any, Callable

from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.cluster import TASK_RETRIES, cluster_gpus, connected, task_resources

from drtriton_training.rewards import RewardPool, capture_job, judge_job, time_group_job


class RayJudgePool(RewardPool):
    """Rollouts judged as Ray tasks of the cluster at `address` (`ray://HEAD:PORT`, `HEAD:PORT`, `auto`, or `local`
    for a Ray of this machine's own), connected from construction to `close`. Raises DrtritonError when the cluster
    cannot be reached, or has no GPU for a "cuda" run (its tasks would wait for ever)."""

    def __init__(self, address: str, device: str, log: Callable[[str], None] = lambda _line: None):
        super().__init__(device, log)
        self._connection = contextlib.ExitStack()
        ray = self._connection.enter_context(connected(address))
        resources = ray.cluster_resources()
        if device == "cuda" and cluster_gpus(ray) == 0:
            self.close()
            raise DrtritonError(f"the Ray cluster at {address} has no GPU for the reward's verifications and timings",
                                "start its nodes where GPUs are (`ray start` finds them), or --set device=cpu")
        retried = {"max_retries": TASK_RETRIES}
        # a capture only traces the program: one CPU wherever the run is
        self._tasks = {
            capture_job: ray.remote(capture_job).options(**task_resources("cpu"), **retried),
            judge_job: ray.remote(judge_job).options(**task_resources(device), **retried),
            time_group_job: ray.remote(time_group_job).options(**task_resources(device), **retried),
        }
        log(f"reward pool on the Ray cluster at {address}: {int(resources.get('CPU', 0))} CPUs, "
            f"{cluster_gpus(ray)} GPUs; each job a task of one {'GPU' if device == 'cuda' else 'CPU'}")

    def submit(self, job: Callable[..., Any], *args: Any) -> Future:
        return self._tasks[job].remote(*args).future()

    def close(self) -> None:
        self._connection.close()
