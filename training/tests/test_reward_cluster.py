"""The reward pool on a Ray cluster started by the test on this machine (CPU workers, the Triton interpreter): real
judge jobs come back with the process pool's verdicts, and a judging whose Ray worker is killed mid-job is retried.
"""

from __future__ import annotations

import os
import signal
import threading
import time

import psutil
import pytest

from drtriton_lsp.models import formats
from drtriton_training.programs import load_heldout
from drtriton_training.rewards import JudgePool, Judging, RlProgram, capture_of_record
from drtriton_training.teach import kernel_candidate

pytestmark = [pytest.mark.cluster, pytest.mark.slow]
pytest.importorskip("ray", reason="needs the cluster extra (pip install 'drtriton-training[cluster]')")

from drtriton_training.reward_cluster import RayJudgePool  # noqa: E402 (Ray is checked for first)

# Runs, and computes the wrong thing: the verifier rejects it for its result (in a worker, as any rollout).
WRONG_MODULE = '''import torch
import triton
import triton.language as tl


@triton.jit
def negate(x, y, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y + offsets, -tl.load(x + offsets, mask=offsets < n), mask=offsets < n)


class ModelNew(torch.nn.Module):
    def __init__(self, *args):
        super().__init__()

    def forward(self, *inputs):
        x = inputs[0].contiguous()
        y = torch.empty_like(x)
        negate[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
'''
JUDGING = Judging(trials=2, verify_timeout_s=600.0)


def programs_from(captures, heldout) -> list[RlProgram]:
    return [RlProgram(program.hash, 1, "validation", program.source, captured["graph"],
                      tuple(captured["forward_params"]), formats.kernel_prompt(program.source))
            for program, captured in zip(heldout, captures)]


def rollouts(programs: list[RlProgram]) -> list[tuple[RlProgram, str]]:
    """Each program's default kernel module (verified) and a module that computes the wrong thing (rejected)."""
    pairs = []
    for program in programs:
        capture = capture_of_record(program)
        pairs += [(program, formats.kernel_completion(kernel_candidate(capture))),
                  (program, formats.kernel_completion(WRONG_MODULE))]
    return pairs


@pytest.fixture(scope="module")
def heldout():
    return load_heldout(1)[:2]


@pytest.fixture(scope="module")
def process_pool_run(heldout):
    """Captures and verdicts of the host's process pool, for the Ray pool to match."""
    with JudgePool(2, "cpu") as pool:
        captures = pool.capture([program.source for program in heldout])
        jobs = rollouts(programs_from(captures, heldout))
        return captures, jobs, pool.judge(jobs, "kernel", JUDGING)


def test_the_ray_pool_captures_and_judges_real_rollouts_as_the_process_pool_does(heldout, process_pool_run):
    captures, jobs, verdicts = process_pool_run
    assert [verdict.outcome for verdict in verdicts] == ["verified", "rejected"] * 2
    assert {verdicts[1].reason, verdicts[3].reason} == {"wrong_result"}
    lines: list[str] = []
    with RayJudgePool("local", "cpu", log=lines.append) as pool:
        assert pool.capture([program.source for program in heldout]) == captures
        assert pool.judge(jobs, "kernel", JUDGING) == verdicts
    assert lines == ["reward pool on the Ray cluster at local: 2 CPUs, 0 GPUs; each job a task of one CPU"]


def ray_worker_mid_judging() -> psutil.Process | None:
    """A Ray worker of this test's own cluster (a descendant of this process) running `judge_job`, while its
    verifier's worker process runs."""
    for process in psutil.Process().children(recursive=True):
        try:
            if process.cmdline()[:1] == ["ray::judge_job"] and any(
                "drtriton_lsp.worker.main" in child.cmdline() for child in process.children()
            ):
                return process
        except psutil.NoSuchProcess:
            continue
    return None


def test_a_judging_whose_ray_worker_is_killed_mid_job_runs_again_and_its_verdict_comes_back(process_pool_run):
    _captures, jobs, verdicts = process_pool_run
    killed: list[int] = []

    def kill_the_first_judging_worker() -> None:
        deadline = time.monotonic() + 120
        while not killed and time.monotonic() < deadline:
            worker = ray_worker_mid_judging()
            if worker is None:
                time.sleep(0.05)
                continue
            os.kill(worker.pid, signal.SIGKILL)
            killed.append(worker.pid)

    with RayJudgePool("local", "cpu") as pool:
        killer = threading.Thread(target=kill_the_first_judging_worker, daemon=True)
        killer.start()
        judged = pool.judge(jobs, "kernel", JUDGING)
        killer.join()
    assert killed, "no Ray worker was seen running a judging"
    assert judged == verdicts  # the killed judging ran again in another worker
