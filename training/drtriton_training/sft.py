"""`drtriton-train sft`: supervised fine-tuning on teach examples (trl's SFTTrainer), resumable in time-limited chunks.

From scratch: a byte-level BPE tokenizer trained on the examples and a Llama-architecture model; or a pretrained
base (LoRA optional). The result is saved as sharded safetensors with a manifest (`drtriton_model.json`).
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.models import formats

from drtriton_training.sft_configs import SftRecipe
from drtriton_training.teach import load_examples, teacher_version

MANIFEST = "drtriton_model.json"
MANIFEST_SCHEMA = "drtriton.model/1"
END_OF_TEXT = "<|endoftext|>"
PADDING = "<|pad|>"


def train_tokenizer(texts: list[str], vocab_size: int):
    """A byte-level BPE tokenizer (GPT-2's pre-tokenization, so a prompt ending in a newline ends on a token
    boundary before any completion that starts with a non-space) trained on `texts`."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[END_OF_TEXT, PADDING],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, eos_token=END_OF_TEXT, pad_token=PADDING, model_max_length=1 << 20
    )


def build_model(recipe: SftRecipe, tokenizer):
    """A Llama-architecture causal LM from scratch, sized by the recipe, for this tokenizer."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=recipe.hidden_size,
        intermediate_size=recipe.intermediate_size,
        num_hidden_layers=recipe.num_layers,
        num_attention_heads=recipe.num_heads,
        num_key_value_heads=recipe.num_heads,
        max_position_embeddings=recipe.max_length,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=None,
        tie_word_embeddings=False,
    )
    torch.manual_seed(recipe.seed)
    return LlamaForCausalLM(config)


def data_fingerprint(examples: list[dict[str, Any]]) -> str:
    """A hash of the training text, so a model card can name exactly the data a model saw."""
    digest = hashlib.sha256()
    for example in examples:
        digest.update(example["prompt"].encode())
        digest.update(example["completion"].encode())
    return digest.hexdigest()[:16]


def sft(recipe: SftRecipe, data: list[Path], out: Path, log=print) -> dict[str, Any]:
    """Train (or resume training) per `recipe` on the teach examples in `data`; save the model under out/model.

    Returns the manifest written beside the model. Resumes from the latest checkpoint in out/checkpoints, with the
    tokenizer saved in out/tokenizer by the first chunk."""
    from datasets import Dataset
    from transformers import AutoTokenizer
    from trl import SFTConfig, SFTTrainer

    examples = load_examples(data, kinds=recipe.kinds, statuses=recipe.statuses, split="train")
    if not examples:
        raise DrtritonError(
            f"no {'/'.join(recipe.statuses)} examples of kinds {', '.join(recipe.kinds)} "
            f"in {', '.join(map(str, data))}",
            "teach more programs, or admit other statuses with --set statuses=verified,unverified",
        )
    out.mkdir(parents=True, exist_ok=True)
    tokenizer_dir = out / "tokenizer"
    if recipe.base_model:
        tokenizer = AutoTokenizer.from_pretrained(recipe.base_model)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
    elif tokenizer_dir.is_dir():
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    else:
        texts = [text for example in examples for text in (example["prompt"], example["completion"])]
        tokenizer = train_tokenizer(texts, recipe.vocab_size)
        tokenizer.save_pretrained(tokenizer_dir)
    rows, too_long, split_tokens = _rows(examples, tokenizer, recipe.max_length)
    log(
        f"sft {recipe.name}: {len(rows)} examples ({too_long} longer than {recipe.max_length} tokens left out; "
        f"{split_tokens} whose prompt tokens are not a prefix of prompt + completion)"
    )
    if not rows:
        raise DrtritonError(
            f"every example is longer than max_length={recipe.max_length} tokens", "raise it with --set max_length=N"
        )
    model = _model(recipe, tokenizer)
    checkpoints = out / "checkpoints"
    arguments = SFTConfig(
        output_dir=str(checkpoints),
        max_length=recipe.max_length,
        completion_only_loss=True,
        packing=False,
        per_device_train_batch_size=recipe.batch_size,
        gradient_accumulation_steps=recipe.gradient_accumulation_steps,
        learning_rate=recipe.learning_rate,
        lr_scheduler_type=recipe.lr_scheduler_type,
        warmup_steps=recipe.warmup_steps,
        weight_decay=recipe.weight_decay,
        max_steps=recipe.max_steps,
        save_steps=recipe.save_steps,
        save_total_limit=2,
        logging_steps=recipe.logging_steps,
        bf16=recipe.bf16,
        use_cpu=recipe.use_cpu,
        gradient_checkpointing=recipe.gradient_checkpointing,
        seed=recipe.seed,
        report_to=[],
        disable_tqdm=True,
        dataloader_num_workers=0,
    )
    started = time.monotonic()
    time_limit = time_limit_callback(recipe.time_limit_s, started)

    peft_config = None
    if recipe.lora:
        from peft import LoraConfig

        peft_config = LoraConfig(
            r=recipe.lora_r, lora_alpha=recipe.lora_alpha, lora_dropout=recipe.lora_dropout,
            target_modules=recipe.lora_target_modules, task_type="CAUSAL_LM",
        )
    trainer = SFTTrainer(
        model=model,
        args=arguments,
        train_dataset=Dataset.from_list(rows),
        processing_class=tokenizer,
        callbacks=[time_limit],
        peft_config=peft_config,
    )
    resume = latest_checkpoint(checkpoints)
    if resume:
        log(f"sft {recipe.name}: resuming from {resume.name}")
    result = trainer.train(resume_from_checkpoint=str(resume) if resume else None)
    step = trainer.state.global_step
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
    manifest = {
        "schema": MANIFEST_SCHEMA,
        "format": formats.FORMAT_VERSION,
        "teacher": teacher_version(),
        "kinds": list(recipe.kinds),
        "recipe": {key: value for key, value in asdict(recipe).items() if key != "notes"},
        "base_model": recipe.base_model,
        "lora": recipe.lora,
        "steps": step,
        "complete": step >= recipe.max_steps,
        "stopped_by_time_limit": time_limit.stopped,
        "train_examples": len(rows),
        "left_out_too_long": too_long,
        "data": {"fingerprint": data_fingerprint(examples), "directories": [str(path) for path in data]},
        "final_loss": losses[-1] if losses else None,
        "train_seconds_this_chunk": round(time.monotonic() - started, 1),
        "train_runtime_s": result.metrics.get("train_runtime"),
    }
    if trainer.is_world_process_zero():  # under `accelerate launch`, one process writes the model
        save_model(
            trainer.model, tokenizer, out / "model", manifest,
            lora=recipe.lora, save_dtype=recipe.save_dtype, max_shard_size=recipe.max_shard_size,
        )
    log(f"sft {recipe.name}: step {step}/{recipe.max_steps}, loss {manifest['final_loss']}, saved {out / 'model'}")
    return manifest


def time_limit_callback(time_limit_s: float | None, started: float, clock: Callable[[], float] = time.monotonic):
    """A trainer callback that stops training (and saves a checkpoint to resume from) at the first step end after
    which another step as long as the longest so far would end past `time_limit_s` seconds from `started` (a
    `clock()` reading): a chunk whose caller kills it at its limit keeps its steps (an RL step at a harder level can
    take twice the last one). None: no limit. Its `stopped` says whether it stopped the run."""
    from transformers import TrainerCallback

    class TimeLimit(TrainerCallback):
        stopped = False
        step_started: float | None = None
        longest_step = 0.0

        def on_step_begin(self, args, state, control, **kwargs):
            self.step_started = clock()

        def on_step_end(self, args, state, control, **kwargs):
            now = clock()
            if self.step_started is not None:
                self.longest_step = max(self.longest_step, now - self.step_started)
            if time_limit_s is not None and now - started + self.longest_step > time_limit_s:
                control.should_training_stop = True
                control.should_save = True
                self.stopped = True
            return control

    return TimeLimit()


def save_model(
    model, tokenizer, directory: Path, manifest: dict[str, Any], *, lora: bool, save_dtype: str, max_shard_size: str
) -> None:
    """Safetensors in shards of at most `max_shard_size`, in `save_dtype` (LoRA: the adapter), the tokenizer and the
    manifest. Generation caches again: training switches `use_cache` off, and a saved config keeps it off otherwise."""
    import torch

    directory.mkdir(parents=True, exist_ok=True)
    model.config.use_cache = True
    if lora:
        model.save_pretrained(directory)
    else:
        dtype = getattr(torch, save_dtype)
        original = next(model.parameters()).dtype
        model.to(dtype).save_pretrained(directory, max_shard_size=max_shard_size, safe_serialization=True)
        model.to(original)
    tokenizer.save_pretrained(directory)
    (directory / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")


def _model(recipe: SftRecipe, tokenizer):
    if not recipe.base_model:
        return build_model(recipe, tokenizer)
    import torch
    from transformers import AutoModelForCausalLM

    dtype = torch.bfloat16 if recipe.bf16 else torch.float32
    return AutoModelForCausalLM.from_pretrained(recipe.base_model, dtype=dtype)


def _rows(examples, tokenizer, max_length: int) -> tuple[list[dict[str, str]], int, int]:
    """Prompt-completion rows that fit `max_length` with the end-of-text token; counts those left out and those
    whose prompt does not tokenize as a prefix of prompt + completion (trl then trains on a shifted boundary)."""
    rows, too_long, split = [], 0, 0
    for example in examples:
        prompt_ids = tokenizer(example["prompt"], add_special_tokens=False)["input_ids"]
        whole_ids = tokenizer(example["prompt"] + example["completion"], add_special_tokens=False)["input_ids"]
        if whole_ids[: len(prompt_ids)] != prompt_ids:
            split += 1
        if len(whole_ids) + 1 > max_length:
            too_long += 1
            continue
        rows.append({"prompt": example["prompt"], "completion": example["completion"]})
    return rows, too_long, split


def latest_checkpoint(directory: Path) -> Path | None:
    """The `checkpoint-N` directory with the highest N under `directory`, or None."""
    checkpoints = [path for path in directory.glob("checkpoint-*") if path.name.split("-")[-1].isdigit()]
    return max(checkpoints, key=lambda path: int(path.name.split("-")[-1]), default=None)
