"""A real OpenSSH server for the remote-runner tests: sshd on 127.0.0.1, a free port, keys made on the spot.

The "remote host" is this machine, reached through sshd as the current user with a key only this server accepts;
the client checks the host key strictly against a known_hosts file written here, and uses an ssh config of its own
(`ssh -F`, passed to drtriton through $DRTRITON_SSH_COMMAND) that names the server with a host alias, as a user's
config would. The remote Python is this interpreter, with this checkout first on its path.
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import psutil
import pytest

REPO = Path(__file__).resolve().parent.parent
HOST_ALIAS = "drtriton-test-gpu"
# sshd run as root needs the privilege separation directory its package would make (a service start does).
PRIVILEGE_SEPARATION_DIRECTORY = Path("/run/sshd")
START_TIMEOUT_S = 15
REMOTE_WORKER_HOST_MODULE = "drtriton_lsp.runners.remote_worker"
# Set by .ci/run: CI installs sshd, so a missing one fails the remote tests instead of skipping them.
REQUIRE_SSHD_VARIABLE = "DRTRITON_TEST_REQUIRE_SSHD"


def sshd_path() -> str | None:
    installed = (path for path in ("/usr/sbin/sshd", "/sbin/sshd") if os.path.exists(path))
    return shutil.which("sshd") or next(installed, None)


@dataclass
class SshServer:
    """A running sshd and the client-side files that reach it."""

    directory: Path
    port: int
    process: subprocess.Popen

    @property
    def address(self) -> str:
        """The drtriton address of this server through the client config's host alias."""
        return f"ssh://{HOST_ALIAS}"

    @property
    def ssh_command(self) -> str:
        """$DRTRITON_SSH_COMMAND for this server: the ssh client with this server's config."""
        return f"ssh -F {self.directory / 'ssh_config'}"

    @property
    def remote_python(self) -> str:
        """The remote Python: this interpreter, importing this checkout (the remote login has none of our
        environment)."""
        return str(self.directory / "python")

    def session_processes(self) -> list[psutil.Process]:
        """The sshd processes serving connections (below the listening one), each with what it runs."""
        return psutil.Process(self.process.pid).children(recursive=True)

    def worker_hosts(self) -> list[psutil.Process]:
        """The remote worker hosts running below this server (one per ssh session of a runner)."""
        hosts = []
        for process in self.session_processes():
            try:
                if REMOTE_WORKER_HOST_MODULE in process.cmdline():
                    hosts.append(process)
            except psutil.Error:
                continue
        return hosts

    def stop(self) -> None:
        """Stop the server and every session it still serves."""
        sessions = self.session_processes()
        self.process.kill()
        self.process.wait()
        for process in sessions:
            try:
                process.kill()
            except psutil.Error:
                continue


def start_ssh_server(directory: Path) -> SshServer:
    """sshd on 127.0.0.1 serving the current user with a key made here; skips the test where sshd is missing."""
    sshd = sshd_path()
    if sshd is None:
        missing = "needs OpenSSH's sshd (Debian: apt-get install openssh-server; .ci/run installs it)"
        if os.environ.get(REQUIRE_SSHD_VARIABLE):
            pytest.fail(f"{missing}; ${REQUIRE_SSHD_VARIABLE} says this run must have it")
        pytest.skip(missing)
    if os.geteuid() == 0 and not PRIVILEGE_SEPARATION_DIRECTORY.is_dir():
        PRIVILEGE_SEPARATION_DIRECTORY.mkdir(mode=0o755)
    directory.mkdir(parents=True, exist_ok=True)
    for key in ("host_key", "user_key"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(directory / key)], check=True)
    shutil.copy(directory / "user_key.pub", directory / "authorized_keys")
    port = _free_port()
    (directory / "sshd_config").write_text(
        f"""Port {port}
ListenAddress 127.0.0.1
HostKey {directory / 'host_key'}
PidFile {directory / 'sshd.pid'}
AuthorizedKeysFile {directory / 'authorized_keys'}
AuthenticationMethods publickey
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
X11Forwarding no
AllowAgentForwarding no
PrintMotd no
"""
    )
    host_key = (directory / "host_key.pub").read_text().split()
    (directory / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_key[0]} {host_key[1]}\n")
    (directory / "ssh_config").write_text(
        f"""Host {HOST_ALIAS}
  HostName 127.0.0.1
  Port {port}
  User {getpass.getuser()}
  IdentityFile {directory / 'user_key'}
  IdentitiesOnly yes
  IdentityAgent none
  UserKnownHostsFile {directory / 'known_hosts'}
  GlobalKnownHostsFile /dev/null
  StrictHostKeyChecking yes
"""
    )
    (directory / "python").write_text(f'#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} "$@"\n')
    (directory / "python").chmod(0o755)
    with (directory / "sshd.log").open("wb") as log:
        process = subprocess.Popen([sshd, "-D", "-e", "-f", str(directory / "sshd_config")], stderr=log)
    server = SshServer(directory, port, process)
    _wait_until_listening(server)
    return server


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _wait_until_listening(server: SshServer) -> None:
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if server.process.poll() is not None:
            log = (server.directory / "sshd.log").read_text()
            pytest.fail(f"sshd ended at start-up (status {server.process.returncode}): {log}")
        try:
            socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.1)
    server.stop()
    pytest.fail(f"sshd did not listen on port {server.port} within {START_TIMEOUT_S} s")
