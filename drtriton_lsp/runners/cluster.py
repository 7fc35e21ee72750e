"""A Ray cluster for work spread over many GPUs and hosts (`bench --cluster`, the training reward pool): connecting to
one, the resources a task asks for, and the errors a user reads when Ray is missing or the cluster cannot be reached.

Ray is an optional extra (`pip install 'drtriton-lsp[cluster]'`); nothing imports it until a cluster is asked for.
"""

from __future__ import annotations

import contextlib
import os
from types import ModuleType
from typing import Any, Iterator

from drtriton_lsp.errors import DrtritonError

INSTALL_HINT = "install the cluster extra: pip install 'drtriton-lsp[cluster]' (Ray 2.60 on every node too)"
# The address that starts a Ray of this machine's own for the run (and stops it at the end), instead of joining one.
LOCAL_CLUSTER = "local"
# How many times Ray runs a task again when its worker process or its node dies (not when the task itself fails:
# a problem's failure is a result, recorded like any other).
TASK_RETRIES = 3


def import_ray() -> ModuleType:
    """The `ray` module, or a DrtritonError that says how to install it."""
    try:
        import ray
    except ImportError:
        raise DrtritonError("--cluster needs Ray, which is not installed here", INSTALL_HINT) from None
    return ray


@contextlib.contextmanager
def connected(address: str) -> Iterator[ModuleType]:
    """Ray connected to the cluster at `address` for the block: `ray://HEAD:PORT` (Ray Client, from any machine),
    `HEAD:PORT` or `auto` (a cluster this machine is a node of), or `local` (a Ray of this machine's own, stopped at
    the end). Raises DrtritonError, with what to check, when the cluster cannot be reached."""
    ray = import_ray()
    if ray.is_initialized():
        raise DrtritonError("Ray is already connected in this process", "run one cluster job per process")
    options: dict[str, Any] = {"log_to_driver": False}
    try:
        if address == LOCAL_CLUSTER:
            ray.init(include_dashboard=False, **options)
        else:
            ray.init(address=address, **options)
    except (ConnectionError, RuntimeError, ValueError, TimeoutError) as error:
        raise DrtritonError(
            f"cannot connect to the Ray cluster at {address}: {error}",
            "check that `ray start --head` runs there (`ray status` on the head says), that the port is reachable "
            "from here (Ray Client: --ray-client-server-port, 10001 by default), and with token authentication, "
            "that RAY_AUTH_MODE=token and the cluster's token (RAY_AUTH_TOKEN or ~/.ray/auth_token) are set here",
        ) from None
    try:
        yield ray
    finally:
        ray.shutdown()


def cluster_gpus(ray: ModuleType) -> int:
    """The GPUs the connected cluster has in all (nodes may join or leave later)."""
    return int(ray.cluster_resources().get("GPU", 0))


def task_resources(device: str) -> dict[str, float]:
    """What one task asks Ray for: a whole GPU on "cuda" (so no other task's work shares it: timings stay alone),
    else one CPU (the Triton interpreter)."""
    return {"num_gpus": 1, "num_cpus": 1} if device == "cuda" else {"num_cpus": 1}


def node_name() -> str:
    """Where a task runs, as its results say it: the node's address and the task's process."""
    import ray

    return f"{ray.util.get_node_ip_address()} (pid {os.getpid()})"
