"""RL recipes for `drtriton-train rl --config NAME`: every field with its type, default, effect and source.

`tiny` proves the path on a CPU in CI; `small` continues the shipped model on one H200 in chunks; `multi_gpu` runs
on several GPUs through accelerate, with vLLM generating the rollouts where vLLM is installed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from drtriton_training.sft_configs import parse_field

# The script writer drtriton ships (`training/models`, SFT-trained): where `small` and `multi_gpu` start.
SHIPPED_MODEL = Path(__file__).resolve().parents[1] / "models"
OBJECTIVES = ("drpo", "grpo")
# Fields that also take "none", with the type of their other values.
NULLABLE_FIELDS = {"model": str, "time_limit_s": float}


@dataclass(frozen=True)
class RlRecipe:
    """One curriculum RL recipe (trl's `GRPOTrainer` underneath; DRPO is a subclass of it).

    Start
        model (`str | None`, default `None`): the SFT checkpoint directory the policy starts from and the KL term
            holds it to (`drtriton-train sft`'s `model/`, the shipped `training/models`, any Hugging Face causal LM
            directory). None builds a Llama of the SFT `tiny` shape on the spot, with a tokenizer trained on the
            run's prompts (CI only: it writes noise). `--model PATH` overrides it.
        kind (`str`, default `"script"`): what the model writes: "script" (schedule scripts, decoded by the
            compiler; the shipped model) or "kernel" (a complete ModelNew module).

    Programs and curriculum (CSP-DAG programs synthesised for the run, held-out hashes refused)
        levels (`tuple[int, ...]`, default `(1, 2, 5, 20)`): the curriculum: compute ops per program, trained in
            this order (DRTriton, arXiv 2603.21465, trains easy to hard).
        train_programs_per_level (`int`, default `64`), eval_programs_per_level (`int`, default `8`): programs of
            the `train` split RL samples prompts from, and of the `validation` split (teach's fixed ~5 % of hashes,
            never trained on by SFT or RL) pass@1 is measured on.
        program_seed (`int`, default `3`): synthesis seed (the shipped model was taught seeds 1 and 2).
        program_scale (`int`, default `1`): the synthesis caps (elements per tensor and in all, FLOPs) times this:
            1 keeps the CPU sizes SFT taught; on a GPU, programs that small time kernel launches, not kernels (the
            first H200 run's speed reward was launch noise), so `small` and `multi_gpu` take 256 (up to 16M
            elements, 64 MB in float32, per tensor, sizes drawn from the top quarter of their range).
        advance_threshold (`float`, default `0.5`): advance to the next level once pass@1 on the current level's
            validation programs reaches it (the paper's 50 %). `--advance-threshold` overrides it.
        eval_every_steps (`int`, default `20`): measure pass@1 every this many steps (and at the start).
        eval_samples (`int`, default `4`), eval_temperature (`float`, default `0.8`): samples per validation program
            and their temperature (pass@1 is the unbiased estimate from them).

    Rollouts and reward
        prompts_per_step (`int`, default `8`), num_generations (`int`, default `8`): a step samples
            `num_generations` rollouts (a group) for each of `prompts_per_step` prompts.
        max_completion_length (`int`, default `256`): tokens per rollout (the shipped model's longest training
            script is ~200 tokens).
        temperature (`float`, default `1.0`): rollout sampling temperature.
        constrained (`bool`, default `True`): hold script rollouts and validation samples to their program's script
            grammar while sampled, as the product samples the model (free, most rollouts are unparseable scripts:
            69-95 % in the first H200 run); kernel rollouts are never held. Not applied to vLLM-generated rollouts.
        device (`str`, default `"cuda"`): where rollouts are verified and timed. "cpu" verifies under Triton's
            interpreter and turns the speed term off (the run says so in its log).
        reward_workers (`int`, default `16`): processes judging rollouts, per training process (each runs the
            product's verifier and benchmark through worker processes of its own; never the trainer's process).
        reward_gpus (`tuple[str, ...]`, default `()`): the GPUs (CUDA_VISIBLE_DEVICES ids of the host) the reward
            processes spread over, `reward_workers` split evenly, each process's workers seeing only its GPU, with a
            lock file per GPU in the run directory (a timing has its GPU alone, across every training process's
            pool). Empty: the training process's own GPU (under `accelerate launch`, the one of its LOCAL_RANK).
            `--reward-gpus 4,5,6,7` overrides it; a Ray cluster (`--cluster`) places each job itself instead.
        trials (`int`, default `5`): verification trials with fresh inputs, as `drtriton optimize`.
        verify_timeout_s (`float`, default `120`), timing_timeout_s (`float`, default `120`): how long one rollout's
            verification, and one program's grouped timing, may take before it is stopped (the product's own limits
            are 600 and 300 s: one slow kernel would hold a step, and a chunk, that long). A verification stopped is
            a rejection (`timeout`); a timing stopped leaves its rollouts' r_s at log(1/100).
        samples_kept_per_step (`int`, default `4`): accepted rollouts written to samples.jsonl each step.
        stall_report_s (`float`, default `300`): a step still running after this many seconds writes the stack of
            every thread of the training process to stderr, and again each interval after, so a stalled step says
            where it waits (sampling, judging, the optimiser).
        hacking_window_steps (`int`, default `5`), hacking_rise (`float`, default `0.2`): warn when a rejection
            kind's share of the rollouts over the last window exceeds its share over the window before by this much.

    Objective
        drpo_lambda (`float`, default `1.0`): DRPO's temperature: correct rollouts are weighted by
            softmax(r_s / lambda) over the group's correct set (r_s = log(t_torch / t_triton)).
        beta (`float`, default `0.04`): weight of the KL term to the starting (SFT) model, both objectives.
        learning_rate (`float`, default `1e-5`): AdamW learning rate, constant after `warmup_steps` (`int`,
            default `0`).
        max_steps (`int`, default `100`): optimiser updates in all; `--steps` overrides it.

    Chunks and checkpoints
        time_limit_s (`float | None`, default `None`): stop (with a checkpoint) after this many seconds; `--resume`
            continues from it with the curriculum's state.
        save_steps (`int`, default `20`): checkpoint every this many steps (and at the end of a chunk).
        max_shard_size (`str`, default `"15MB"`), save_dtype (`str`, default `"bfloat16"`): the saved model's shards
            (the GPU machine returns files of at most 16 MiB) and dtype.
        bf16 (`bool`, default `False`): bfloat16 mixed precision; use_cpu (`bool`, default `False`): train on the
            CPU even where a GPU exists (trl 1.16 needs it said on a CPU).
        attn_implementation (`str`, default `"sdpa"`): the attention the policy and its reference run
            (transformers' `attn_implementation`: "sdpa", "eager"). `small` takes "eager": on the H200, bf16 SDPA's
            backward gave NaN gradients (from the last layer's attention down) on batches where eager attention and
            fp32 SDPA gave finite ones (training/results/rl-h200-2026-12-03b.md, non_finite_probe.py).
        use_vllm (`bool`, default `False`), vllm_mode (`str`, default `"colocate"`): generate rollouts with vLLM
            (trl's `use_vllm`; "colocate" shares each training GPU, "server" talks to `trl vllm-serve`).
        seed (`int`, default `0`): sampling, shuffling and the tiny model's weights.
    """

    name: str
    model: str | None = None
    kind: str = "script"
    levels: tuple[int, ...] = (1, 2, 5, 20)
    train_programs_per_level: int = 64
    eval_programs_per_level: int = 8
    program_seed: int = 3
    program_scale: int = 1
    advance_threshold: float = 0.5
    eval_every_steps: int = 20
    eval_samples: int = 4
    eval_temperature: float = 0.8
    prompts_per_step: int = 8
    num_generations: int = 8
    max_completion_length: int = 256
    temperature: float = 1.0
    constrained: bool = True
    device: str = "cuda"
    reward_workers: int = 16
    reward_gpus: tuple[str, ...] = ()
    trials: int = 5
    verify_timeout_s: float = 120.0
    timing_timeout_s: float = 120.0
    samples_kept_per_step: int = 4
    stall_report_s: float = 300.0
    hacking_window_steps: int = 5
    hacking_rise: float = 0.2
    drpo_lambda: float = 1.0
    beta: float = 0.04
    learning_rate: float = 1e-5
    warmup_steps: int = 0
    max_steps: int = 100
    time_limit_s: float | None = None
    save_steps: int = 20
    max_shard_size: str = "15MB"
    save_dtype: str = "bfloat16"
    bf16: bool = False
    use_cpu: bool = False
    attn_implementation: str = "sdpa"
    use_vllm: bool = False
    vllm_mode: str = "colocate"
    seed: int = 0

    def with_overrides(self, assignments: list[str]) -> RlRecipe:
        """The recipe with `field=value` assignments applied (`--set eval_every_steps=5`), each parsed as its
        field's type; raises ValueError naming the fields there are."""
        fields = {f.name for f in dataclasses.fields(self)} - {"name"}
        changes = {}
        for assignment in assignments:
            name, equals, text = assignment.partition("=")
            if not equals or name not in fields:
                raise ValueError(f"--set takes FIELD=VALUE with a recipe field ({', '.join(sorted(fields))}); "
                                 f"got {assignment!r}")
            changes[name] = parse_field(name, text, getattr(self, name), NULLABLE_FIELDS)
        return dataclasses.replace(self, **changes).checked()

    def checked(self) -> RlRecipe:
        """The recipe itself, or ValueError saying which fields contradict each other and what to set."""
        if self.kind not in ("script", "kernel"):
            raise ValueError(f"kind is script or kernel, got {self.kind!r}")
        if self.attn_implementation not in ("sdpa", "eager"):
            raise ValueError(f"attn_implementation is sdpa or eager, got {self.attn_implementation!r}")
        if self.device not in ("cpu", "cuda"):
            raise ValueError(f"device is cpu or cuda, got {self.device!r}")
        if not self.levels or list(self.levels) != sorted(set(self.levels)):
            raise ValueError(f"levels must rise, easy to hard, such as 1,2,5,20; got {self.levels}")
        if self.num_generations < 2:
            raise ValueError("num_generations must be at least 2: both objectives compare rollouts within a group")
        if min(self.prompts_per_step, self.train_programs_per_level, self.eval_programs_per_level) < 1:
            raise ValueError("prompts_per_step and the programs per level must be at least 1")
        if self.reward_gpus and self.device != "cuda":
            raise ValueError(f"reward_gpus {','.join(self.reward_gpus)} needs device cuda; the CPU has one lane")
        if len(set(self.reward_gpus)) != len(self.reward_gpus) or self.reward_workers < max(len(self.reward_gpus), 1):
            raise ValueError("reward_gpus must name each GPU once, with at least one reward worker per GPU")
        if min(self.verify_timeout_s, self.timing_timeout_s, self.stall_report_s) <= 0:
            raise ValueError("verify_timeout_s, timing_timeout_s and stall_report_s must be above 0")
        if self.eval_every_steps < 1 or self.eval_samples < 1 or self.drpo_lambda <= 0:
            raise ValueError("eval_every_steps and eval_samples must be at least 1, drpo_lambda above 0")
        return self

    @property
    def rollouts_per_step(self) -> int:
        """The generation batch: trl's `generation_batch_size`, a multiple of `num_generations` by construction."""
        return self.prompts_per_step * self.num_generations


RECIPES = {
    # CPU, CI: a tiny Llama built on the spot, levels 1 -> 2, a handful of programs; a few steps in well under a
    # minute. It proves the path (rollouts, the verifier's reward, both objectives, curriculum, resume), nothing more.
    "tiny": RlRecipe(
        name="tiny",
        levels=(1, 2),
        train_programs_per_level=2,
        eval_programs_per_level=1,
        eval_every_steps=2,
        eval_samples=2,
        prompts_per_step=2,
        num_generations=4,
        max_completion_length=24,
        device="cpu",
        reward_workers=2,
        trials=2,
        verify_timeout_s=600.0,  # the interpreter on a busy CI machine
        learning_rate=1e-4,
        max_steps=4,
        save_steps=1000,
        save_dtype="float32",
        use_cpu=True,
        hacking_window_steps=2,
    ),
    # One H200, from the shipped model: 64 rollouts a step, verified and timed by 16 reward workers; chunks of 8
    # minutes (the device call's limit is 10) that resume with the curriculum's state.
    "small": RlRecipe(
        name="small",
        model=str(SHIPPED_MODEL),
        program_scale=256,
        time_limit_s=420.0,
        bf16=True,
        attn_implementation="eager",
    ),
    # Several GPUs (accelerate launch --config_file training/configs/accelerate_multi_gpu.yaml -m
    # drtriton_training.cli rl --config multi_gpu ...): prompts_per_step is per GPU, each GPU's batch holds whole
    # groups (DRPO's groups never straddle GPUs); vLLM generates the rollouts where it is installed (colocated);
    # 12 reward processes per GPU process leave cores to the trainers on a 128-core, 8-GPU host, each process's
    # pool on its own GPU (reward_gpus empty) while its trainer waits for the verdicts.
    "multi_gpu": RlRecipe(
        name="multi_gpu",
        model=str(SHIPPED_MODEL),
        train_programs_per_level=256,
        eval_programs_per_level=16,
        program_scale=256,
        prompts_per_step=8,
        num_generations=16,
        reward_workers=12,
        time_limit_s=420.0,
        bf16=True,
        use_vllm=True,
    ),
}


def recipe(name: str, overrides: list[str] = ()) -> RlRecipe:
    """The named recipe with `--set` overrides; raises ValueError naming the recipes there are."""
    if name not in RECIPES:
        raise ValueError(f"no RL config {name!r}; configs: {', '.join(RECIPES)}")
    return RECIPES[name].with_overrides(list(overrides))
