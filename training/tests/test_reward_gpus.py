"""The reward pool over several GPUs of one host, checked on the CPU through the environment its worker processes get:
each pool process pinned to one GPU with that GPU's lock, a training process's own GPU under a launcher, and the
options that choose the GPUs or a Ray cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.protocol import GPU_LOCK_VARIABLE
from drtriton_training import cli, rewards
from drtriton_training.rewards import VISIBLE_GPUS_VARIABLE, JudgePool
from drtriton_training.rl import reward_gpus, reward_pool
from drtriton_training.rl_configs import recipe


def worker_environment() -> dict[str, str | None]:
    """Pool job: the GPU variables of the environment a worker process started by this pool process gets."""
    _command, environment = rewards.pool_runner()._environment_key(None, None)
    return {name: dict(environment).get(name) for name in (VISIBLE_GPUS_VARIABLE, GPU_LOCK_VARIABLE)}


@pytest.mark.slow
def test_each_pool_process_starts_its_workers_on_one_gpu_with_that_gpus_own_lock(tmp_path, monkeypatch):
    monkeypatch.setenv(VISIBLE_GPUS_VARIABLE, "0,1,2,3,4,5")  # the trainer's view is replaced, not narrowed
    with JudgePool(2, "cuda", gpus=("2", "5"), gpu_lock_directory=tmp_path) as pool:
        seen = [future.result() for future in [pool.submit(worker_environment) for _ in range(4)]]
    lanes = [{VISIBLE_GPUS_VARIABLE: "2", GPU_LOCK_VARIABLE: str(tmp_path / "gpu2.lock")},
             {VISIBLE_GPUS_VARIABLE: "5", GPU_LOCK_VARIABLE: str(tmp_path / "gpu5.lock")}]
    # jobs go to the lane with the fewest in flight: two on each GPU
    assert sorted(seen, key=str) == sorted(lanes * 2, key=str)


@pytest.mark.slow
def test_without_gpus_named_the_workers_keep_the_trainers_gpu_and_the_cpu_has_no_lock(tmp_path, monkeypatch):
    monkeypatch.delenv(VISIBLE_GPUS_VARIABLE, raising=False)
    with JudgePool(1, "cuda", gpu_lock_directory=tmp_path) as pool:
        assert pool.submit(worker_environment).result() == {
            VISIBLE_GPUS_VARIABLE: None, GPU_LOCK_VARIABLE: str(tmp_path / "gpu.lock")
        }
    with JudgePool(1, "cpu") as pool:
        assert pool.submit(worker_environment).result() == {VISIBLE_GPUS_VARIABLE: None, GPU_LOCK_VARIABLE: None}
    with pytest.raises(DrtritonError, match="3 reward processes cannot cover 4 GPUs"):
        JudgePool(3, "cuda", gpus=("0", "1", "2", "3"), gpu_lock_directory=tmp_path)


def test_the_processes_split_evenly_and_a_pool_without_a_lock_directory_keeps_its_locks_until_closed():
    with JudgePool(5, "cuda", gpus=("0", "1")) as pool:  # processes start with the first job: none here
        assert [lane._max_workers for lane in pool.lanes] == [3, 2]
        locks = [Path(environment[GPU_LOCK_VARIABLE]) for environment in pool.lane_environments]
        assert locks[0].parent == locks[1].parent and locks[0].parent.is_dir() and locks[0] != locks[1]
    assert not locks[0].parent.exists()


def test_under_a_launcher_each_training_processs_pool_takes_its_local_ranks_gpu():
    multi_gpu = recipe("multi_gpu")
    launched = {"WORLD_SIZE": "4", "LOCAL_RANK": "1"}
    assert reward_gpus(multi_gpu, launched) == ("1",)
    assert reward_gpus(multi_gpu, {**launched, VISIBLE_GPUS_VARIABLE: "4,5,6,7"}) == ("5",)
    assert reward_gpus(multi_gpu, {}) == ()  # one process: the GPU it sees
    assert reward_gpus(recipe("multi_gpu", ["reward_gpus=6,7"]), launched) == ("6", "7")
    assert reward_gpus(recipe("tiny"), launched) == ()  # the CPU


def test_the_reward_gpus_are_checked_and_a_ray_cluster_places_jobs_itself(tmp_path, capsys):
    with pytest.raises(ValueError, match="needs device cuda"):
        recipe("tiny", ["reward_gpus=0,1"])
    with pytest.raises(ValueError, match="each GPU once"):
        recipe("small", ["reward_gpus=0,0"])
    with pytest.raises(ValueError, match="one reward worker per GPU"):
        recipe("small", ["reward_gpus=0,1,2", "reward_workers=2"])
    with pytest.raises(DrtritonError, match="on a Ray cluster, Ray gives each job its GPU"):
        reward_pool(recipe("small", ["reward_gpus=0,1"]), tmp_path, "local", print)
    out = tmp_path / "run"
    assert cli.main(["rl", "--config", "small", "--out", str(out), "--reward-gpus", "0,1", "--cluster", "local"]) == 1
    assert "leave out --reward-gpus or --cluster" in capsys.readouterr().err
    assert not out.exists()  # nothing left that a corrected command would call an RL run already there
    with pytest.raises(SystemExit):
        cli.main(["rl", "--config", "tiny", "--out", str(out), "--reward-gpus", "0"])
    assert "needs device cuda" in capsys.readouterr().err
