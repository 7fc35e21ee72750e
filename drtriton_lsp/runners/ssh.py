"""Run worker jobs on a GPU host over ssh: each job is an ssh session running the remote worker's host, which speaks
the worker protocol on the session's stdio. No port is opened anywhere; tasks, candidates and results are its JSON.

The system `ssh` client does the connecting, with the user's config and agent: BatchMode (it never prompts, so no
password is asked or stored), host keys checked as the user's config says, no agent or X11 forwarding (the remote
runs generated code), no port forwardings from the config (several sessions at once would fight over the ports).
$DRTRITON_SSH_COMMAND replaces `ssh` (e.g. "ssh -F ~/.ssh/gpu_config"), as GIT_SSH_COMMAND does for git.
Limits and cancellation: time and cancel are enforced here (killing ssh closes the session, which ends the remote
worker); memory by the remote host (runners/remote_worker.py), which measures the worker's processes there.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.local import EnvironmentKey, LocalRunner, describe_exit
from drtriton_lsp.runners.runner import JobFailure, JobLimits

SSH_COMMAND_VARIABLE = "DRTRITON_SSH_COMMAND"
DEFAULT_REMOTE_PYTHON = "python3"
REMOTE_WORKER_MODULE = "drtriton_lsp.runners.remote_worker"
REMOTE_FORM = "ssh://[user@]host[:port]"
# ssh's own exit status when it failed (to connect, or the connection broke) or the remote command died of a signal;
# the remote host's `worker_exit` report tells the last apart.
SSH_FAILED = 255
SSH_OPTIONS = (
    "-T",  # no terminal: the channel carries the protocol's bytes as they are
    "-a",  # no agent forwarding: generated code runs at the other end
    "-x",  # no X11 forwarding
    "-e", "none",  # no escape character
    "-o", "BatchMode=yes",  # never prompt (password, passphrase, unknown host key): fail instead, and say why
    "-o", "ClearAllForwardings=yes",  # the config's LocalForward/RemoteForward would clash between sessions
    "-o", "ServerAliveInterval=15",  # a connection that went silent is declared lost within a minute
    "-o", "ServerAliveCountMax=4",
    "-o", "ConnectTimeout=30",
)
# A host as ssh takes it: a name, an alias from the ssh config, or an address; never an option ("-o...").
HOST_PATTERN = re.compile(r"[A-Za-z0-9_.:%][A-Za-z0-9_.:%-]*")
USER_PATTERN = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_.-]*")


@dataclass(frozen=True)
class RemoteHost:
    """Where the workers run: `ssh://[user@]host[:port]`, host possibly an alias from the user's ssh config."""

    host: str
    user: str | None = None
    port: int | None = None

    @classmethod
    def parse(cls, address: str) -> RemoteHost:
        """The host named by `address`; a DrtritonError saying the expected form if it is not one."""
        problem = remote_problem(address)
        if problem:
            raise DrtritonError(
                f"the remote address {address!r} {problem}", f"write it as {REMOTE_FORM}, e.g. ssh://gpu-box"
            )
        parts = urlsplit(address.strip())
        return cls(host=parts.hostname, user=parts.username, port=parts.port)

    @property
    def address(self) -> str:
        user = f"{self.user}@" if self.user else ""
        host = f"[{self.host}]" if ":" in self.host else self.host  # an IPv6 address
        port = f":{self.port}" if self.port else ""
        return f"ssh://{user}{host}{port}"

    def ssh_arguments(self) -> list[str]:
        """ssh's options and destination for this host: `[-p PORT] [-l USER] -- HOST`."""
        port = ["-p", str(self.port)] if self.port else []
        user = ["-l", self.user] if self.user else []
        return [*port, *user, "--", self.host]

    def ssh_command_line(self, command: str) -> str:
        """How a user runs `command` there by hand, e.g. `ssh -p 2222 me@gpu-box true`."""
        port = ["-p", str(self.port)] if self.port else []
        return shlex.join(["ssh", *port, f"{self.user}@{self.host}" if self.user else self.host, command])


def remote_problem(address: object) -> str:
    """What is wrong with `address` as an ssh:// address ("" when nothing is)."""
    if not isinstance(address, str):
        return "is not text"
    try:
        parts = urlsplit(address.strip())
        port = parts.port
    except ValueError as error:
        return f"is not an address ({error})"
    if parts.scheme != "ssh":
        return "does not start with ssh://"
    if parts.path not in ("", "/") or parts.query or parts.fragment or parts.password:
        return "holds more than a user, a host and a port"
    if not parts.hostname or not HOST_PATTERN.fullmatch(parts.hostname):
        return "names no host (letters, digits, '.', '-', '_'; not starting with '-')"
    if parts.username is not None and not USER_PATTERN.fullmatch(parts.username):
        return "names a user with characters ssh would not take"
    if port == 0:
        return "has port 0"
    return ""


def ssh_command() -> list[str]:
    """The ssh client and the options the user gave it in $DRTRITON_SSH_COMMAND (default: `ssh`)."""
    return shlex.split(os.environ.get(SSH_COMMAND_VARIABLE, "")) or ["ssh"]


def remote_shell_word(path: str) -> str:
    """`path` quoted for the remote login shell, keeping a leading `~/` (the remote user's home) expandable."""
    if path.startswith("~/"):
        return "~/" + shlex.quote(path[2:])
    return shlex.quote(path)


@dataclass(kw_only=True)
class SshRunner(LocalRunner):
    """Runs each job on `remote`, in `python`'s environment there (drtriton installed), through one ssh session.

    A spare is an ssh session whose worker has preloaded, started ahead like a local one. The worker's environment
    is the remote login's, plus the job's own variables (`env`, `extra_env`); `python_path` is not used: the
    caller's folders are not on the remote, so a task that imports modules beside the user's file needs them
    installed there too.
    """

    remote: RemoteHost
    python: str = DEFAULT_REMOTE_PYTHON

    @property
    def host(self) -> str:
        return self.remote.address

    def _environment_key(self, env: dict[str, str | None] | None, python_path: list[str] | None) -> EnvironmentKey:
        variables = {**self.extra_env, **(env or {}), "PYTHONUNBUFFERED": "1"}
        removed = [f"-u {shlex.quote(name)}" for name, value in sorted(variables.items()) if value is None]
        assigned = [shlex.quote(f"{name}={value}") for name, value in sorted(variables.items()) if value is not None]
        # exec: the host replaces the login shell, so its parent is the session's sshd process (see remote_worker)
        remote_command = " ".join(
            ["exec", "env", *removed, *assigned, remote_shell_word(self.python), "-m", REMOTE_WORKER_MODULE]
        )
        command = (*ssh_command(), *SSH_OPTIONS, *self.remote.ssh_arguments(), remote_command)
        return command, frozenset(os.environ.items())  # ssh needs the caller's environment: its agent, its HOME

    def _limits_for_the_worker_side(self, limits: JobLimits) -> dict[str, Any] | None:
        return {"memory_bytes": limits.memory_bytes}

    def _measures_memory(self) -> bool:
        return False  # the local process is ssh: the remote host measures the worker

    def _failure_without_answer(
        self, returncode: int | None, stderr_tail: str, exit_report: dict[str, Any] | None
    ) -> JobFailure:
        if exit_report is not None:
            if exit_report.get("verdict") == "memory_limit":
                return JobFailure("memory_limit", f"on {self.host}: {exit_report['detail']}", stderr_tail)
            process = f"the worker process on {self.host}"
            return JobFailure("crashed", describe_exit(exit_report["returncode"], process), stderr_tail)
        said = _last_line(stderr_tail)
        if returncode is None or returncode < 0 or returncode == SSH_FAILED:
            return JobFailure(
                "connection_lost",
                f"the ssh connection to {self.host} failed or ended before the job did"
                + (f" ({said})" if said else ""),
                stderr_tail,
                hint=(
                    f"check that `{self.remote.ssh_command_line('true')}` works from this "
                    "machine without a prompt (your key in the agent or the ssh config, the host's key in known_hosts) "
                    "and that the host is up; the job can be run again"
                ),
            )
        return JobFailure(
            "remote_setup",
            f"{self.python} on {self.host} could not start a drtriton worker (exit status {returncode})"
            + (f": {said}" if said else ""),
            stderr_tail,
            hint=(
                "install drtriton on the remote host, the same version as here, and point --remote-python "
                "(or the drtriton.remotePython setting) at the python of that environment"
            ),
        )


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1] if lines else ""
