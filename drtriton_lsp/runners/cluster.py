"""A Ray cluster for work spread over many GPUs and hosts (`bench --cluster`, the training reward pool): connecting to
one, the resources a task asks for, and the errors a user reads when Ray is missing or the cluster cannot be reached.

Ray is an optional extra (`pip install 'drtriton-lsp[cluster]'`); nothing imports it until a cluster is asked for.
"""

from __future__ import annotations

import contextlib
import os
import socket
from types import ModuleType
from typing import Iterator

from drtriton_lsp.errors import DrtritonError

INSTALL_HINT = "install the cluster extra: pip install 'drtriton-lsp[cluster]' (Ray 2.60 on every node too)"
# The address that starts a Ray of this machine's own for the run (and stops it at the end), instead of joining one.
LOCAL_CLUSTER = "local"
# Ray Client's head starts a server per client, and on a busy head that start fails now and then ("Starting Ray client
# server failed": measured here, 2 of 6 connections to a fresh local head): so many connections are tried in all.
CLIENT_CONNECT_ATTEMPTS = 3
# ray.init keeps retrying an address where nothing listens for minutes: a plain TCP connection says so in seconds.
REACH_TIMEOUT_S = 10
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
    try:
        _connect(ray, address)
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


def _connect(ray: ModuleType, address: str) -> None:
    """ray.init for `address`, trying a Ray Client connection again when the head failed to start its server."""
    if address == LOCAL_CLUSTER:
        ray.init(include_dashboard=False, log_to_driver=False)
        return
    check_reachable(address)
    for attempt in range(1, CLIENT_CONNECT_ATTEMPTS + 1):
        try:
            ray.init(address=address, log_to_driver=False)
            return
        except RuntimeError as error:
            transient = address.startswith("ray://") and "client server failed" in str(error)
            if not transient or attempt == CLIENT_CONNECT_ATTEMPTS:
                raise
            ray.shutdown()


def check_reachable(address: str) -> None:
    """Raises ConnectionError when nothing accepts a TCP connection at a `HEAD:PORT` or `ray://HEAD:PORT` address
    within REACH_TIMEOUT_S (`auto` and other forms are left to Ray)."""
    host, separator, port = address.removeprefix("ray://").rpartition(":")
    if not separator or not port.isdigit():
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=REACH_TIMEOUT_S).close()
    except OSError as error:
        raise ConnectionError(f"nothing answers at {host}:{port} ({error})") from None


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
