"""The accelerate and DeepSpeed configs of the several-GPU runs (training/configs/), read by accelerate's own loaders:
each is a config accelerate launches with, and the DeepSpeed file's values are all filled by the 7b recipe's.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from accelerate.commands.config.config_args import ClusterConfig, load_config_from_file
from accelerate.utils import DeepSpeedPlugin, DistributedType

from drtriton_training.sft_configs import recipe

REPO = Path(__file__).resolve().parents[2]
CONFIGS = REPO / "training" / "configs"


@pytest.mark.parametrize("name", ["accelerate_multi_gpu.yaml", "accelerate_deepspeed_zero2.yaml"])
def test_each_accelerate_config_loads_as_one_machine_over_its_gpus(name):
    config = load_config_from_file(str(CONFIGS / name))
    assert isinstance(config, ClusterConfig) and not config.use_cpu
    assert (config.num_machines, config.machine_rank, config.num_processes) == (1, 0, 8)
    assert config.distributed_type in (DistributedType.MULTI_GPU, DistributedType.DEEPSPEED)


def test_the_zero2_config_is_filled_by_the_7b_recipe_and_names_a_deepspeed_file_that_exists(monkeypatch):
    config = load_config_from_file(str(CONFIGS / "accelerate_deepspeed_zero2.yaml"))
    assert config.distributed_type == DistributedType.DEEPSPEED
    deepspeed_file = REPO / config.deepspeed_config["deepspeed_config_file"]  # relative to the repository root
    assert deepspeed_file.is_file()
    monkeypatch.chdir(REPO)
    plugin = DeepSpeedPlugin(hf_ds_config=config.deepspeed_config["deepspeed_config_file"],
                             zero3_init_flag=config.deepspeed_config["zero3_init_flag"])
    assert plugin.zero_stage == 2
    seven_b = recipe("7b")
    plugin.set_mixed_precision("bf16" if seven_b.bf16 else "no")
    per_gpu, accumulation = seven_b.batch_size, seven_b.gradient_accumulation_steps
    # what accelerate fills from the training arguments; a value the file fixed otherwise is refused here
    plugin.deepspeed_config_process(
        must_match=True, train_micro_batch_size_per_gpu=per_gpu, gradient_accumulation_steps=accumulation,
        train_batch_size=per_gpu * accumulation * config.num_processes, gradient_clipping=1.0,
    )
    filled = plugin.deepspeed_config
    assert not [key for key, value in _leaves(filled) if value == "auto"]
    assert filled["bf16"]["enabled"] is True and filled["train_batch_size"] == 2 * 8 * 8
    assert "optimizer" not in filled  # the trainer's AdamW: no DeepSpeed op to compile


def _leaves(config: dict, prefix: str = ""):
    for key, value in config.items():
        if isinstance(value, dict):
            yield from _leaves(value, f"{prefix}{key}.")
        else:
            yield f"{prefix}{key}", value
