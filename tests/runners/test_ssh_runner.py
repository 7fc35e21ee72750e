"""The ssh runner: addresses it takes and refuses, the ssh command it runs, and jobs through a real sshd: devices of
the remote host, spares, crashes, memory limits, hosts that cannot be reached or used, and a connection dropped
mid-job, which fails the job plainly and leaves nothing running on the remote.

The sshd tests start `drtriton worker` processes through ssh on this machine (tests/ssh_server.py).
"""

from __future__ import annotations

import os
import platform
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest

from drtriton_lsp.engine.session import WorkerSession
from drtriton_lsp.engine.verify import verify_candidate
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners import protocol
from drtriton_lsp.runners.local import LocalRunner
from drtriton_lsp.runners.runner import JobFailure, JobLimits
from drtriton_lsp.runners.ssh import SSH_COMMAND_VARIABLE, RemoteHost, SshRunner, remote_problem
from drtriton_lsp.task import Task
from tests.conftest import FIXTURES
from tests.process_trees import alive_after, below
from tests.test_no_orphaned_workers import CANDIDATE_HOST_MODULE, wait_for_file, wait_until_spinning

CPU_ENVIRONMENT = {"TRITON_INTERPRET": "1"}
CRASHING_TASK = Task(name="crash", kind="module", source="import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)\n")
# 1.5 GiB written (so resident), then a wait
MEMORY_HOG_TASK = Task(
    name="hog", kind="module", source="import time\nHELD = b'x' * (1536 * 1024**2)\ntime.sleep(600)\n"
)


# Addresses and the ssh command: no sshd needed.


def test_an_address_gives_ssh_its_port_user_and_host_and_an_alias_stays_for_the_ssh_config():
    assert RemoteHost.parse("ssh://me@gpu-box:2222").ssh_arguments() == ["-p", "2222", "-l", "me", "--", "gpu-box"]
    alias = RemoteHost.parse("ssh://gpu-box")
    assert alias.ssh_arguments() == ["--", "gpu-box"] and alias.address == "ssh://gpu-box"
    assert RemoteHost.parse("ssh://[::1]:22").address == "ssh://[::1]:22"


@pytest.mark.parametrize(
    "address, problem",
    [
        ("gpu-box", "does not start with ssh://"),
        ("ssh://-oProxyCommand=sh", "names no host"),  # would be an ssh option: runs a local command
        ("ssh://-fnv", "names no host"),  # would be ssh's options -f -n -v
        ("ssh://gpu box", "names no host"),
        ("ssh://-l@gpu-box", "names a user with characters ssh would not take"),
        ("ssh://me:secret@gpu-box", "holds more than a user, a host and a port"),  # no password is ever stored
        ("ssh://gpu-box/home", "holds more than a user, a host and a port"),
        ("ssh://gpu-box:70000", "is not an address"),
    ],
)
def test_an_address_that_is_not_user_host_and_port_is_refused_saying_why(address, problem):
    assert remote_problem(address).startswith(problem)
    with pytest.raises(DrtritonError, match=f"^the remote address '.*' {problem}") as caught:
        RemoteHost.parse(address)
    assert caught.value.hint == "write it as ssh://[user@]host[:port], e.g. ssh://gpu-box"


def test_ssh_never_prompts_or_forwards_and_the_remote_gets_only_the_jobs_variables(monkeypatch):
    monkeypatch.setenv(SSH_COMMAND_VARIABLE, "ssh -F /home/me/gpu_config")
    monkeypatch.setenv("DRTRITON_TEST_LOCAL_ONLY", "1")
    runner = SshRunner(remote=RemoteHost.parse("ssh://gpu-box"), python="/opt/my env/bin/python")
    command, local_environment = runner._environment_key({"TRITON_INTERPRET": None}, python_path=["/home/me/project"])
    assert command[:3] == ("ssh", "-F", "/home/me/gpu_config")
    options = " ".join(command)
    assert "-o BatchMode=yes" in options and " -a " in options and " -x " in options
    assert command[-3:-1] == ("--", "gpu-box")
    # the local folder means nothing there; the local environment stays here (ssh itself needs it: agent, home)
    assert command[-1] == (
        "exec env -u TRITON_INTERPRET PYTHONUNBUFFERED=1 '/opt/my env/bin/python' -m drtriton_lsp.runners.remote_worker"
    )
    assert ("DRTRITON_TEST_LOCAL_ONLY", "1") in local_environment
    home_python = SshRunner(remote=RemoteHost.parse("ssh://gpu-box"), python="~/venv/bin/python")
    remote_command = home_python._environment_key(None, None)[0][-1]
    assert remote_command.endswith(" ~/venv/bin/python -m drtriton_lsp.runners.remote_worker")


# Jobs through a real sshd.


def remote_runner(server, python: str | None = None, address: str | None = None) -> SshRunner:
    return SshRunner(remote=RemoteHost.parse(address or server.address), python=python or server.remote_python)


@pytest.mark.slow
def test_a_job_over_ssh_sees_the_remote_hosts_devices_and_names_the_host(remote_ssh):
    remote = remote_runner(remote_ssh).call("capabilities", {})
    local = LocalRunner().call("capabilities", {})
    assert remote["host"] == platform.node() and "host" not in local
    assert {key: value for key, value in remote.items() if key != "host"} == local


@pytest.mark.slow
def test_a_spare_over_ssh_is_a_session_with_a_preloaded_worker_that_serves_the_next_job(remote_ssh, started_workers):
    runner = remote_runner(remote_ssh)
    runner.prepare(env=CPU_ENVIRONMENT)
    (session,) = started_workers
    assert "ssh" in os.path.basename(session.args[0])
    assert runner.call("capabilities", {}, env=CPU_ENVIRONMENT)["host"] == platform.node()
    assert len(started_workers) == 1 and session.returncode == 0  # the job ran in the spare's session, which ended


@pytest.mark.slow
def test_a_worker_killed_on_the_remote_is_a_crash_not_a_lost_connection(remote_ssh):
    with pytest.raises(JobFailure) as caught:
        remote_runner(remote_ssh).call("capture", {"task": CRASHING_TASK.to_json()}, env=CPU_ENVIRONMENT)
    assert caught.value.reason == "crashed"
    assert caught.value.detail.startswith(f"the worker process on {remote_ssh.address} was killed by SIGSEGV")


@pytest.mark.slow
def test_the_memory_limit_is_enforced_on_the_remote_host(remote_ssh):
    limits = JobLimits(timeout_s=60, memory_bytes=1024**3)
    with pytest.raises(JobFailure) as caught:
        remote_runner(remote_ssh).call(
            "capture", {"task": MEMORY_HOG_TASK.to_json()}, env=CPU_ENVIRONMENT, limits=limits
        )
    assert caught.value.reason == "memory_limit"
    detail = caught.value.detail
    assert detail.startswith(f"on {remote_ssh.address}: used ") and "over the 1.0 GiB limit" in detail


@pytest.mark.slow
def test_a_host_that_refuses_the_connection_fails_the_job_saying_what_to_check(remote_ssh):
    closed_port = remote_runner(remote_ssh, address=f"{remote_ssh.address}:1")
    with pytest.raises(JobFailure) as caught:
        closed_port.call("capabilities", {})
    failure = caught.value
    assert failure.reason == "connection_lost" and failure.runner_fault
    assert "Connection refused" in failure.detail
    assert failure.hint.startswith(
        "check that `ssh -p 1 drtriton-test-gpu true` works from this machine without a prompt"
    )


@pytest.mark.slow
def test_an_unknown_host_key_fails_at_once_instead_of_prompting(remote_ssh):
    # the address, not the alias: the config's known_hosts and key do not apply, and ssh knows no key for the host
    unknown = remote_runner(remote_ssh, address=f"ssh://127.0.0.1:{remote_ssh.port}")
    started = time.monotonic()
    with pytest.raises(JobFailure) as caught:
        unknown.call("capabilities", {}, limits=JobLimits(timeout_s=60))
    assert caught.value.reason == "connection_lost" and "Host key verification failed" in caught.value.detail
    assert time.monotonic() - started < 30


@pytest.mark.slow
def test_a_remote_python_without_drtriton_fails_the_job_saying_how_to_set_it_up(remote_ssh):
    with pytest.raises(JobFailure) as caught:
        remote_runner(remote_ssh, python="/nonexistent/bin/python3").call("capabilities", {})
    failure = caught.value
    assert failure.reason == "remote_setup" and failure.runner_fault
    assert failure.detail.startswith(
        f"/nonexistent/bin/python3 on {remote_ssh.address} could not start a drtriton worker"
    )
    assert "--remote-python" in failure.hint and "drtriton.remotePython" in failure.hint


@pytest.mark.slow
def test_cancelling_a_remote_job_ends_its_processes_on_the_remote(remote_ssh, kill_at_end, tmp_path):
    cancel = threading.Event()
    failures: list[JobFailure] = []
    hangs = tmp_path / "hangs"

    def capture() -> None:
        try:
            remote_runner(remote_ssh).call(
                "capture",
                {"task": hanging_task(hangs)},
                env=CPU_ENVIRONMENT,
                cancel=cancel,
                limits=JobLimits(timeout_s=120),
            )
        except JobFailure as failure:
            failures.append(failure)

    job = threading.Thread(target=capture)
    job.start()
    wait_for_file(hangs, 120)
    remote = remote_ssh.session_processes()
    kill_at_end.update(remote)
    cancel.set()
    job.join(10)
    assert [failure.reason for failure in failures] == ["cancelled"]
    assert alive_after(remote, 5) == []


@pytest.mark.slow
def test_a_connection_dropped_mid_verification_is_no_verdict_and_leaves_nothing_running(remote_ssh, kill_at_end):
    task = Task.from_file(FIXTURES / "verify" / "task_scale_relu.py")
    spins = (FIXTURES / "verify" / "spins.py").read_text()  # its forward never returns
    outcome: list[BaseException] = []

    def verify() -> None:
        try:
            verify_candidate(task, spins, session=WorkerSession(remote_runner(remote_ssh)), device="cpu", trials=1)
        except BaseException as error:  # noqa: BLE001 - the test reads what the caller got
            outcome.append(error)

    job = threading.Thread(target=verify)
    job.start()
    wait_until_spinning(remote_ssh.process.pid, CANDIDATE_HOST_MODULE)  # the candidate's process, in its forward
    remote = remote_ssh.session_processes()
    kill_at_end.update(remote)
    (host,) = remote_ssh.worker_hosts()
    host.parent().kill()  # the session's sshd process: the connection ends as if the network had dropped
    job.join(30)
    (error,) = outcome
    assert isinstance(error, DrtritonError) and not isinstance(error, JobFailure)
    assert error.message.startswith(
        f"the verify worker failed: the ssh connection to {remote_ssh.address} failed or ended"
    )
    assert error.hint.startswith("check that `ssh drtriton-test-gpu true` works")
    assert alive_after(remote, 5) == []  # the host, the worker, its group guard and the candidate's process


@pytest.mark.slow
def test_the_host_ends_its_worker_mid_job_when_the_callers_input_ends(kill_at_end, tmp_path):
    # As when ssh shares one connection between sessions: the channel closes, the connection (and sshd) lives on.
    host = subprocess.Popen(
        [sys.executable, "-m", "drtriton_lsp.runners.remote_worker"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, env={**os.environ, **CPU_ENVIRONMENT},
    )
    kill_at_end.add(psutil.Process(host.pid))
    hangs = tmp_path / "hangs"
    protocol.write_message(host.stdin, protocol.request(1, "capture", {"task": hanging_task(hangs)}))
    wait_for_file(hangs, 120)
    everything = below(host.pid)
    kill_at_end.update(everything)
    host.stdin.close()
    assert host.wait(10) == 0  # its last words are in the pipe
    messages = list(iter(lambda: protocol.read_message(host.stdout), None))
    assert messages[-1] == {"jsonrpc": "2.0", "method": protocol.WORKER_EXIT, "params": {"returncode": -signal.SIGKILL}}
    assert alive_after(everything, 5) == []


def hanging_task(marker: Path) -> dict:
    """A task whose import never returns, once it has created `marker` (the job is then under way)."""
    source = f"import pathlib, time\npathlib.Path({str(marker)!r}).touch()\ntime.sleep(600)\n"
    return Task(name="hang", kind="module", source=source).to_json()
