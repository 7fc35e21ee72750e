"""SFT recipes for `drtriton-train sft --config NAME`: every field with its type, default, effect and source.

`tiny` proves the path on a CPU in CI; `small` is the model drtriton ships (one H200); `7b` fine-tunes a
pretrained code model with LoRA (several GPUs through accelerate; proven here only at tiny scale).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field


# Fields that also take "none" (`--set time_limit_s=none`), with the type of their other values.
NULLABLE_FIELDS = {"base_model": str, "time_limit_s": float}


@dataclass(frozen=True)
class SftRecipe:
    """One supervised fine-tuning recipe (trl's `SFTTrainer` underneath).

    Data
        kinds (`tuple[str, ...]`, default `("script", "refine")`): the example kinds trained on. "script": op graph ->
            the compiler's default schedule; "refine": graph + script + its time -> a faster searched script (Little
            Dragon's two tasks, arXiv 2610.20980); "kernel": program -> verified ModelNew module (DRTriton,
            arXiv 2603.21465). Scripts are tens of tokens, kernels thousands: a small model learns scripts.
        statuses (`tuple[str, ...]`, default `("verified",)`): teacher statuses admitted. "verified" only, unless
            the user asks: "unverified" (teach --no-verify) and "no_candidate" (every op stays in PyTorch).

    Model
        base_model (`str | None`, default `None`): a Hugging Face checkpoint directory (or Hub id where reachable)
            to fine-tune; None trains a Llama-architecture model from scratch with a tokenizer trained on the data.
        vocab_size (`int`, default `2048`): from scratch only: the byte-level BPE vocabulary trained on the prompts
            and completions (the graph and script grammar is small; bytes cover anything unseen).
        hidden_size (`int`, default `256`), num_layers (`int`, default `4`), num_heads (`int`, default `4`),
            intermediate_size (`int`, default `688`): from scratch only: the Llama model's width, depth, attention
            heads and MLP width.
        max_length (`int`, default `1024`): tokens per example (prompt + completion); longer examples are left
            out, never truncated (a cut completion would teach a broken script). From scratch it is also the
            model's context.

    LoRA (pretrained bases; Hu et al., arXiv 2106.09685)
        lora (`bool`, default `False`): train low-rank adapters instead of every weight.
        lora_r (`int`, default `16`), lora_alpha (`int`, default `32`), lora_dropout (`float`, default `0.05`):
            the adapters' rank, scale (alpha / r) and dropout.
        lora_target_modules (`str`, default `"all-linear"`): which layers get adapters (peft's name for every
            linear layer but the output head).

    Optimisation (transformers' `TrainingArguments`)
        learning_rate (`float`, default `1e-3`): peak AdamW learning rate (from scratch tolerates 1e-3; LoRA 1e-4,
            full fine-tuning of a pretrained model far less).
        lr_scheduler_type (`str`, default `"cosine"`), warmup_steps (`int`, default `20`): the schedule over
            `max_steps` and its linear warm-up.
        weight_decay (`float`, default `0.01`): AdamW's decoupled weight decay.
        batch_size (`int`, default `8`): examples per device per step; gradient_accumulation_steps (`int`,
            default `1`): steps accumulated per optimiser update.
        max_steps (`int`, default `100`): optimiser updates in all (the schedule's length); a time-limited run
            stops earlier and resumes towards it.
        time_limit_s (`float | None`, default `None`): stop (and save a checkpoint) after this many seconds of
            training, so each chunk fits a machine lease; `sft` run again resumes from the checkpoint.
        save_steps (`int`, default `200`): checkpoint every this many steps (plus one at a time-limit stop).
        bf16 (`bool`, default `False`): bfloat16 mixed precision (GPUs from Ampere on).
        use_cpu (`bool`, default `False`): train on the CPU even where a GPU exists (CI; trl otherwise assumes bf16).
        gradient_checkpointing (`bool`, default `False`): recompute activations in the backward pass (trl turns it
            on by default; it pays only for large models).
        seed (`int`, default `0`): weight initialisation, shuffling and dropout.
        logging_steps (`int`, default `10`): loss logged every this many steps.

    Saving
        save_dtype (`str`, default `"bfloat16"`): dtype of the saved weights ("bfloat16" halves the files).
        max_shard_size (`str`, default `"15MB"`): safetensors shards no larger than this (the GPU machine returns
            files of at most 16 MiB).
    """

    name: str
    kinds: tuple[str, ...] = ("script", "refine")
    statuses: tuple[str, ...] = ("verified",)
    base_model: str | None = None
    vocab_size: int = 2048
    hidden_size: int = 256
    num_layers: int = 4
    num_heads: int = 4
    intermediate_size: int = 688
    max_length: int = 1024
    lora: bool = False
    lora_r: int = 16
    lora_alpha: int = 32
    lora_dropout: float = 0.05
    lora_target_modules: str = "all-linear"
    learning_rate: float = 1e-3
    lr_scheduler_type: str = "cosine"
    warmup_steps: int = 20
    weight_decay: float = 0.01
    batch_size: int = 8
    gradient_accumulation_steps: int = 1
    max_steps: int = 100
    time_limit_s: float | None = None
    save_steps: int = 200
    bf16: bool = False
    use_cpu: bool = False
    gradient_checkpointing: bool = False
    seed: int = 0
    logging_steps: int = 10
    save_dtype: str = "bfloat16"
    max_shard_size: str = "15MB"
    notes: tuple[str, ...] = field(default=(), compare=False)

    def with_overrides(self, assignments: list[str]) -> SftRecipe:
        """The recipe with `field=value` assignments applied (`--set max_steps=20`), each parsed as its field's type."""
        fields = {f.name: f for f in dataclasses.fields(self)}
        changes = {}
        for assignment in assignments:
            name, equals, text = assignment.partition("=")
            if not equals or name not in fields or name in ("name", "notes"):
                settable = ", ".join(n for n in fields if n not in ("name", "notes"))
                raise ValueError(f"--set takes FIELD=VALUE with a recipe field ({settable}); got {assignment!r}")
            changes[name] = parse_field(name, text, getattr(self, name), NULLABLE_FIELDS)
        return dataclasses.replace(self, **changes)


def parse_field(name: str, text: str, current: object, nullable: dict[str, type]) -> object:
    """`text` as a value of the recipe field `name`, whose current value is `current`; the fields in `nullable`
    (name -> type of a value that is not None) also take "none". Raises ValueError saying what the field takes."""
    if isinstance(current, bool):
        if text.lower() not in ("true", "false"):
            raise ValueError(f"{name} takes true or false, got {text!r}")
        return text.lower() == "true"
    if isinstance(current, tuple):
        parts = tuple(part for part in text.split(",") if part)
        return tuple(int(part) for part in parts) if current and isinstance(current[0], int) else parts
    if name in nullable and (current is None or text.lower() == "none"):
        return None if text.lower() == "none" else nullable[name](text)
    if isinstance(current, int):
        return int(text)
    if isinstance(current, float):
        return float(text)
    return text


RECIPES = {
    # CPU, CI: a 0.2M-parameter model that learns a few examples in under a minute; proves the path, nothing more.
    "tiny": SftRecipe(
        name="tiny",
        vocab_size=512,
        hidden_size=64,
        num_layers=2,
        num_heads=4,
        intermediate_size=128,
        max_length=1024,
        batch_size=4,
        max_steps=30,
        warmup_steps=3,
        learning_rate=3e-3,
        save_steps=1000,
        use_cpu=True,
        save_dtype="float32",
        logging_steps=5,
    ),
    # One H200: ~21M parameters (42 MB in bfloat16, three 15 MB shards), trained in time-limited chunks.
    "small": SftRecipe(
        name="small",
        vocab_size=4096,
        hidden_size=384,
        num_layers=10,
        num_heads=6,
        intermediate_size=1024,
        max_length=1536,
        batch_size=32,
        max_steps=4000,
        warmup_steps=100,
        learning_rate=1e-3,
        time_limit_s=300.0,
        save_steps=500,
        bf16=True,
        logging_steps=50,
    ),
    # Several GPUs (accelerate launch --config_file training/configs/accelerate_multi_gpu.yaml): LoRA on a
    # pretrained code model, both writer kinds (arXiv 2603.21465 warmed Qwen2.5-Coder-7B-Instruct up with SFT).
    "7b": SftRecipe(
        name="7b",
        kinds=("script", "refine", "kernel"),
        base_model="Qwen/Qwen2.5-Coder-7B-Instruct",
        max_length=4096,
        lora=True,
        learning_rate=1e-4,
        warmup_steps=50,
        batch_size=2,
        gradient_accumulation_steps=8,
        max_steps=2000,
        save_steps=200,
        bf16=True,
        gradient_checkpointing=True,
        logging_steps=10,
    ),
}


def recipe(name: str, overrides: list[str] = ()) -> SftRecipe:
    """The named recipe with `--set` overrides; raises ValueError naming the recipes there are."""
    if name not in RECIPES:
        raise ValueError(f"no SFT config {name!r}; configs: {', '.join(RECIPES)}")
    return RECIPES[name].with_overrides(list(overrides))
