"""Which runner runs a caller's jobs: this machine's worker processes, or a GPU host's over ssh.

The CLI's `--remote` / `--remote-python` and the editor's `drtriton.remote` / `drtriton.remotePython` both end here.
"""

from __future__ import annotations

from drtriton_lsp.runners.local import LocalRunner
from drtriton_lsp.runners.runner import Runner
from drtriton_lsp.runners.ssh import DEFAULT_REMOTE_PYTHON, RemoteHost, SshRunner


def runner_for(remote: str | None, remote_python: str | None = None) -> Runner:
    """A runner on `remote` (`ssh://[user@]host[:port]`, with `remote_python` there), or on this machine when
    `remote` is empty. A malformed address raises DrtritonError saying the expected form."""
    if not remote:
        return LocalRunner()
    return SshRunner(remote=RemoteHost.parse(remote), python=remote_python or DEFAULT_REMOTE_PYTHON)
