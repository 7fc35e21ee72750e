"""`drtriton-train rl`: curriculum RL from an SFT checkpoint on trl's GRPOTrainer, rewarded by the product's verifier
and benchmark (in a pool of worker processes over this host's GPUs, or on a Ray cluster), with DRPO's decoupled
objective beside GRPO's summed one.

A run directory holds programs.jsonl (the captured programs), initial_model/ (tiny only), checkpoints/ (each with the
curriculum's state), rl_log.jsonl (a line per step and per pass@1 measurement), samples.jsonl and model/ at the end.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any, Callable

from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.models import formats
from drtriton_lsp.models.script_grammar import ScriptConstraint, ScriptGrammar, script_constraint

from drtriton_training.answer_room import compiler_answer, model_context, prompt_problem, token_count
from drtriton_training.curriculum import Curriculum, CurriculumSampler
from drtriton_training.evaluate import Sampler, level_summary
from drtriton_training.programs import heldout_hashes
from drtriton_training.rewards import (
    DecoupledReward,
    JudgePool,
    Judging,
    RejectionMonitor,
    RewardPool,
    RlProgram,
)
from drtriton_training.rl_configs import OBJECTIVES, RlRecipe
from drtriton_training.sft import MANIFEST_SCHEMA, build_model, latest_checkpoint, save_model
from drtriton_training.sft import time_limit_callback, train_tokenizer
from drtriton_training.sft_configs import RECIPES as SFT_RECIPES
from drtriton_training.teach import split_of, teacher_version

PROGRAMS_FILE = "programs.jsonl"
LOG_FILE = "rl_log.jsonl"
SAMPLES_FILE = "samples.jsonl"
RUN_FILE = "run.json"


def rl(recipe: RlRecipe, out: Path, *, objective: str, resume: bool = False, cluster: str | None = None,
       log: Callable[[str], None] = print) -> dict[str, Any]:
    """Train (or, with `resume`, continue) per `recipe` with `objective` ("drpo" or "grpo"), the rollouts judged on
    the Ray cluster at `cluster` where one is given; save the policy under out/model and return its manifest. Raises
    DrtritonError for a run directory, model or cluster that cannot be used."""
    if objective not in OBJECTIVES:
        raise DrtritonError(f"no objective {objective!r}", f"pass --objective {' or '.join(OBJECTIVES)}")
    started = time.monotonic()
    checkpoints = out / "checkpoints"
    speed_on = recipe.device == "cuda"
    with reward_pool(recipe, out, cluster, log) as pool:  # first: a cluster that cannot be used leaves no run behind
        resume_from = _check_run_directory(out, recipe, objective, resume)
        out.mkdir(parents=True, exist_ok=True)
        log(f"rl {recipe.name} ({objective}): verification on {recipe.device}; "
            + ("speed term on: r_s = log(t_torch / t_triton) for verified rollouts" if speed_on else
               "speed term off on the CPU (Triton's interpreter times nothing): r_s = 0, DRPO weighs correct rollouts "
               "uniformly"))
        programs = _programs(recipe, out, pool, log)
        model_path = _starting_model(recipe, out, programs, log)
        curriculum = (Curriculum.load(resume_from) if resume_from else
                      Curriculum(recipe.levels, recipe.advance_threshold))
        if resume_from:
            log(f"rl {recipe.name}: resuming from {resume_from.name} at level {curriculum.level}")
        step_log = RunLog(out / LOG_FILE, curriculum, objective, log, started)
        reward = DecoupledReward(
            {program.hash: program for program in programs}, pool, kind=recipe.kind,
            judging=Judging(recipe.trials, recipe.verify_timeout_s, recipe.timing_timeout_s),
            speed_on=speed_on, samples_path=out / SAMPLES_FILE, samples_kept=recipe.samples_kept_per_step,
            monitor=RejectionMonitor(recipe.hacking_window_steps, recipe.hacking_rise), on_step=step_log.step,
        )
        stall_report = StallReport(recipe.stall_report_s)
        trainer, time_limit = _trainer(
            recipe, objective, model_path, programs, curriculum, reward, step_log, checkpoints, started, stall_report
        )
        try:
            trainer.train(resume_from_checkpoint=str(resume_from) if resume_from else None)
        finally:
            stall_report.disarm()  # a step that raised leaves no report armed in the process
        step = trainer.state.global_step
        manifest = {
            "schema": MANIFEST_SCHEMA,
            "format": formats.FORMAT_VERSION,
            "teacher": teacher_version(),
            "kinds": [recipe.kind],
            "recipe": asdict(recipe),
            "rl": {"objective": objective, "start": str(model_path), "curriculum": asdict(curriculum)},
            "steps": step,
            "complete": step >= recipe.max_steps,
            "stopped_by_time_limit": time_limit.stopped,
            "train_seconds_this_chunk": round(time.monotonic() - started, 1),
        }
        if trainer.is_world_process_zero():  # under `accelerate launch`, one process writes the model
            save_model(trainer.model, trainer.processing_class, out / "model", manifest, lora=False,
                       save_dtype=recipe.save_dtype, max_shard_size=recipe.max_shard_size)
    log(f"rl {recipe.name} ({objective}): step {step}/{recipe.max_steps} at level {curriculum.level}; "
        f"saved {out / 'model'}")
    return manifest


def _check_run_directory(out: Path, recipe: RlRecipe, objective: str, resume: bool) -> Path | None:
    """The checkpoint to resume from (None for a fresh run), after checking that `out` is what was asked for."""
    checkpoint = latest_checkpoint(out / "checkpoints")
    run_file = out / RUN_FILE
    if not resume:
        if checkpoint or run_file.is_file():
            raise DrtritonError(f"{out} already holds an RL run", "pass --resume to continue it, or another --out")
        out.mkdir(parents=True, exist_ok=True)
        run_file.write_text(json.dumps({"recipe": recipe.name, "objective": objective, "model": recipe.model}) + "\n")
        return None
    if checkpoint is None:
        raise DrtritonError(f"--resume: {out} holds no checkpoint to resume from",
                            "run the same command without --resume first (a chunk ends with a checkpoint)")
    started_as = json.loads(run_file.read_text())
    asked = {"recipe": recipe.name, "objective": objective, "model": recipe.model}
    if started_as != asked:
        raise DrtritonError(f"{out} was started as {started_as}, not {asked}",
                            "resume with the same --config, --objective and --model, or start another --out")
    return checkpoint


def reward_pool(recipe: RlRecipe, out: Path, cluster: str | None, log: Callable[[str], None]) -> RewardPool:
    """The run's reward pool: Ray tasks on the cluster at `cluster` when one is given, else processes of this host
    over `reward_gpus` (their GPU locks in the run directory, shared by every training process of the run)."""
    if cluster is None:
        return JudgePool(recipe.reward_workers, recipe.device, gpus=reward_gpus(recipe, os.environ),
                         gpu_lock_directory=out, log=log)
    if recipe.reward_gpus:
        raise DrtritonError("--reward-gpus places the reward processes of this host; on a Ray cluster, Ray gives each "
                            "job its GPU", "leave out --reward-gpus or --cluster")
    from drtriton_training.reward_cluster import RayJudgePool

    return RayJudgePool(cluster, recipe.device, log=log)


def reward_gpus(recipe: RlRecipe, environ: dict[str, str]) -> tuple[str, ...]:
    """The GPUs of this training process's reward pool: the recipe's `reward_gpus`; else, under a launcher of several
    processes (`accelerate launch`: WORLD_SIZE and LOCAL_RANK set), the GPU of this process's local rank as
    CUDA_VISIBLE_DEVICES names it; else none (the workers see what this process sees)."""
    if recipe.reward_gpus or recipe.device != "cuda":
        return recipe.reward_gpus
    if int(environ.get("WORLD_SIZE", "1")) <= 1 or "LOCAL_RANK" not in environ:
        return ()
    rank = int(environ["LOCAL_RANK"])
    visible = [part.strip() for part in environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if part.strip()]
    return (visible[rank] if visible else str(rank),)


def capture_programs(recipe: RlRecipe, out: Path, cluster: str | None = None, log: Callable[[str], None] = print
                     ) -> Path:
    """Synthesise and capture the run's programs into out/programs.jsonl (on the Ray cluster at `cluster` where one
    is given), and stop. Synthesis needs OR-Tools; a run whose directory already holds the file needs neither it nor
    the capture (the GPU machine has no room for the wheel beside the model): copy the file into each arm's run
    directory there."""
    out.mkdir(parents=True, exist_ok=True)
    if cluster is None:
        pool: RewardPool = JudgePool(min(recipe.reward_workers, os.cpu_count() or 1), "cpu")
    else:
        from drtriton_training.reward_cluster import RayJudgePool

        pool = RayJudgePool(cluster, "cpu", log=log)
    with pool:
        programs = _programs(recipe, out, pool, log)
    log(f"rl {recipe.name}: {len(programs)} programs in {out / PROGRAMS_FILE}")
    return out / PROGRAMS_FILE


def _programs(recipe: RlRecipe, out: Path, pool: RewardPool, log) -> list[RlProgram]:
    """The run's programs, captured (read back from programs.jsonl when a chunk before captured them)."""
    path = out / PROGRAMS_FILE
    if path.is_file():
        return [_program_from_json(json.loads(line)) for line in path.read_text().splitlines() if line.strip()]
    chosen = []
    for level in recipe.levels:
        chosen += _split_programs(level, recipe)
    log(f"rl {recipe.name}: capturing {len(chosen)} programs ({recipe.train_programs_per_level} train, "
        f"{recipe.eval_programs_per_level} validation per level)")
    programs = []
    for synthetic, captured in zip(chosen, pool.capture([program.source for program in chosen])):
        if "error" in captured:
            level = synthetic.metadata["level"]
            log(f"rl {recipe.name}: left out {synthetic.hash} (level {level}): {captured['error']}")
            continue
        graph = captured["graph"]
        prompt = (formats.script_prompt(OpGraph.from_json(graph)) if recipe.kind == "script"
                  else formats.kernel_prompt(synthetic.source))
        programs.append(RlProgram(synthetic.hash, synthetic.metadata["level"], split_of(synthetic.hash),
                                  synthetic.source, graph, tuple(captured["forward_params"]), prompt,
                                  captured["guards"]))
    with path.open("w") as lines:
        for program in programs:
            lines.write(json.dumps(asdict(program)) + "\n")
    return programs


def _program_from_json(record: dict[str, Any]) -> RlProgram:
    return RlProgram(**{**record, "forward_params": tuple(record["forward_params"])})


def _split_programs(level: int, recipe: RlRecipe):
    """The first programs of `level` under the run's seed that fill the train and validation quotas (teach's split
    by hash: the same program is on the same side for SFT and RL; held-out hashes are never drawn)."""
    from drtriton_training.dataset import synthesize_level  # OR-Tools, needed only before programs.jsonl exists
    from drtriton_training.shapes import SynthesisLimits

    wanted = {"train": recipe.train_programs_per_level, "validation": recipe.eval_programs_per_level}
    count = recipe.train_programs_per_level + 25 * recipe.eval_programs_per_level
    while True:
        candidates = synthesize_level(level, count, recipe.program_seed, exclude=heldout_hashes(),
                                      limits=SynthesisLimits().scaled(recipe.program_scale),
                                      workers=min(os.cpu_count() or 1, 8))
        by_split = {split: [p for p in candidates if split_of(p.hash) == split][:n] for split, n in wanted.items()}
        if all(len(by_split[split]) == n for split, n in wanted.items()) or len(candidates) < count:
            return by_split["train"] + by_split["validation"]
        count *= 2


def _starting_model(recipe: RlRecipe, out: Path, programs: list[RlProgram], log) -> Path:
    """The checkpoint the policy starts from and the KL term refers to (trl loads the reference from this path)."""
    if recipe.model is not None:
        path = Path(recipe.model)
        if not (path / "config.json").is_file():
            raise DrtritonError(
                f"no model at {path} (no config.json)",
                "pass --model with a model directory: `drtriton-train sft --out DIR` writes DIR/model; the shipped "
                "script writer is training/models",
            )
        return path
    path = out / "initial_model"
    if not (path / "config.json").is_file():
        shape = SFT_RECIPES["tiny"]
        texts = [program.prompt for program in programs] + [formats.script_completion("keep x")]
        tokenizer = train_tokenizer(texts, shape.vocab_size)
        model = build_model(shape, tokenizer)
        model.save_pretrained(path)
        tokenizer.save_pretrained(path)
        log(f"rl {recipe.name}: built a Llama of the SFT tiny shape in {path} (it writes noise: CI only)")
    return path


class RunLog:
    """rl_log.jsonl and the console: a line per step (level, last pass@1, outcomes, rejection kinds, cheating count,
    parser messages, reward statistics, warnings) and per pass@1 measurement, each with the seconds since the chunk
    started (`chunk_seconds`: what a step costs)."""

    def __init__(self, path: Path, curriculum: Curriculum, objective: str, log: Callable[[str], None],
                 started: float | None = None):
        self.path = path
        self.curriculum = curriculum
        self.objective = objective
        self.log = log
        self.started = time.monotonic() if started is None else started

    def write(self, record: dict[str, Any]) -> None:
        record = {**record, "chunk_seconds": round(time.monotonic() - self.started, 1)}
        with self.path.open("a") as lines:
            lines.write(json.dumps(record) + "\n")

    def step(self, stats: dict[str, Any]) -> None:
        record = {"event": "step", "objective": self.objective, "level": self.curriculum.level,
                  "pass@1": self.curriculum.last_pass_at_1(), **stats}
        self.write(record)
        outcomes = ", ".join(f"{count} {outcome}" for outcome, count in stats["outcomes"].items())
        speed = f", speed mean {stats['speed']['mean']:.3f}" if stats["speed"] else ""
        self.log(f"step {stats['step']} level {record['level']}: {outcomes}; correctness mean "
                 f"{stats['correctness']['mean']:.3f}{speed}; distinct answers per prompt "
                 f"{stats['distinct_answers']['mean']:.1f}; rejections {stats['rejections'] or 'none'}")
        for warning in stats["warnings"]:
            self.log(f"warning: step {stats['step']}: {warning}")

    def selection(self, programs: int, left_out: dict[str, dict[int, int]], long_answers: dict[int, int],
                  context: int | None, room: int) -> None:
        """Which of the run's `programs` it left out (`left_out`: per reason, per level) and how many it kept whose
        compiler answer is longer than the `room` a rollout may write (per level)."""
        self.write({"event": "programs", "programs": programs, "context": context, "max_completion_length": room,
                    "left_out": left_out, "answer_longer_than_completion": long_answers})
        for reason, counts in left_out.items():
            said = ", ".join(f"{count} of level {level}" for level, count in sorted(counts.items()))
            self.log(f"left out {said}: {reason}" + (
                f" (less than max_completion_length={room} of the model's {context} tokens left to answer in)"
                if reason != NOTHING_TO_PLACE else " (the graph has no op a script places)"))
        if long_answers:
            said = ", ".join(f"{count} of level {level}" for level, count in sorted(long_answers.items()))
            self.log(f"warning: {said}: the compiler's answer is longer than max_completion_length={room} tokens "
                     "(rollouts are cut before the end line; raise it with --set if the context allows)")

    def skipped_update(self, step: int, parameters: list[str], loss: float, batch: Path) -> None:
        """A step whose gradient was not finite: the optimiser left the model as it was; its loss batch (the
        tensors of the rollouts) and the weights it ran on are saved at `batch` to reproduce it
        (training/scripts/non_finite_probe.py)."""
        self.write({"event": "skipped_update", "objective": self.objective, "step": step, "loss": loss,
                    "non_finite_gradients": len(parameters), "first": parameters[:3], "batch": str(batch)})
        self.log(f"warning: step {step}: the gradient of {len(parameters)} parameters ({', '.join(parameters[:3])}"
                 f"{', ...' if len(parameters) > 3 else ''}) is not finite (loss {loss:.4g}); the model was left as "
                 f"it was this step; its batch is in {batch}")

    def generation(self, rollouts: int, seconds: float) -> None:
        """One batch of rollouts sampled (how long sampling takes beside judging: a chunk that stalls says which)."""
        self.write({"event": "generation", "objective": self.objective, "rollouts": rollouts,
                    "seconds": round(seconds, 1)})
        self.log(f"sampled {rollouts} rollouts in {seconds:.1f} s")

    def measurement(self, step: int, summary: dict[str, Any], advanced: bool) -> None:
        entry = self.curriculum.history[-1]
        self.write({"event": "eval", "objective": self.objective, **entry, "programs": summary["programs"]})
        pass_at_1 = "-" if entry["pass@1"] is None else f"{entry['pass@1']:.2f}"
        move = f"; advancing to level {entry['advanced_to']}" if advanced else ""
        self.log(f"eval at step {step}: level {entry['level']} pass@1 {pass_at_1} on {summary['programs']} "
                 f"validation programs (threshold {self.curriculum.threshold}){move}")


def drop_non_finite_gradients(model) -> list[str]:
    """The names of `model`'s parameters whose gradient holds a NaN or an infinity; when there is any, every gradient
    is dropped, so the optimiser leaves the whole model as it was this step (clipping a non-finite norm would write
    NaN into every weight, and the next step's sampling would fail on NaN probabilities)."""
    import torch

    with_gradients = [(name, parameter.grad) for name, parameter in model.named_parameters()
                      if parameter.grad is not None]
    finite = [torch.isfinite(gradient).all() for _name, gradient in with_gradients]
    if not finite or bool(torch.stack(finite).all()):  # one read back from the device per step
        return []
    for parameter in model.parameters():
        parameter.grad = None
    return [name for (name, _gradient), ok in zip(with_gradients, finite) if not ok]


class StallReport:
    """Writes every thread's stack to `stream` when a step outlasts `after_s` seconds, and again each `after_s`
    until the step ends: a stalled step names the call it waits in, with nothing to attach to the process."""

    def __init__(self, after_s: float, stream=None):
        self.after_s = after_s
        self.stream = stream

    def arm(self) -> None:
        faulthandler.dump_traceback_later(self.after_s, repeat=True, file=self.stream or sys.__stderr__)

    def disarm(self) -> None:
        faulthandler.cancel_dump_traceback_later()


def measure_level(model, tokenizer, programs: list[RlProgram], reward: DecoupledReward, recipe: RlRecipe
                  ) -> dict[str, Any]:
    """pass@1 (and the valid share) of the policy on validation programs: `eval_samples` samples each at
    `eval_temperature` (evaluate.py's sampler and summary), judged by the reward's pool."""
    device = str(next(model.parameters()).device)
    sampler = Sampler(model, tokenizer, device, recipe.seed)
    was_training = model.training
    model.eval()
    completions = [sampler.complete(program.prompt, recipe.eval_samples, recipe.eval_temperature,
                                    recipe.max_completion_length, constraint=rollout_constraint(program, recipe))
                   for program in programs]
    if was_training:
        model.train()
    pairs = [(program.hash, completion) for program, answers in zip(programs, completions) for completion in answers]
    verdicts = iter(reward.judge([h for h, _ in pairs], [c for _, c in pairs]))
    records = []
    for program in programs:
        judged = [next(verdicts) for _ in range(recipe.eval_samples)]
        records.append({
            "samples": recipe.eval_samples,
            "valid": sum(verdict.outcome != "unparsed" for verdict in judged),
            "correct": sum(verdict.outcome == "verified" for verdict in judged),
        })
    return level_summary(records, recipe.eval_samples)


# Why `answerable_programs` leaves a program out: its prompt, or (a script writer) a graph with no op to place, whose
# only answer the grammar allows is the bare end line, which no parser takes.
NOTHING_TO_PLACE = "nothing to place"


def answerable_programs(programs: list[RlProgram], tokenizer, context: int | None, recipe: RlRecipe, step_log: RunLog
                        ) -> list[RlProgram]:
    """The programs a rollout can answer: the others are left out, counted per reason and level in the run's log. A
    prompt that leaves less than `recipe.max_completion_length` tokens of the model's `context` to answer in is too
    long (a cut prompt would describe another program, and positions past the context are ones the model never
    saw). Also counted: the programs kept whose compiler answer is longer than a rollout may write."""
    from drtriton_lsp.compiler.fragments import schedulable_ops
    from drtriton_training.rewards import capture_of_record

    kept: list[RlProgram] = []
    left_out: dict[str, dict[int, int]] = {}
    long_answers: dict[int, int] = {}
    for program in programs:
        reason = (prompt_problem(token_count(tokenizer, program.prompt), recipe.max_completion_length, context)
                  .partition(":")[0])
        if not reason and recipe.kind == "script" and not schedulable_ops(OpGraph.from_json(program.graph)):
            reason = NOTHING_TO_PLACE
        if reason:
            left_out.setdefault(reason, {})
            left_out[reason][program.level] = left_out[reason].get(program.level, 0) + 1
            continue
        kept.append(program)
        if token_count(tokenizer, compiler_answer(capture_of_record(program), recipe.kind)) > recipe.max_completion_length:
            long_answers[program.level] = long_answers.get(program.level, 0) + 1
    step_log.selection(len(programs), left_out, long_answers, context, recipe.max_completion_length)
    return kept


def rollout_constraint(program: RlProgram, recipe: RlRecipe) -> ScriptConstraint | None:
    """What a rollout for `program` is held to while sampled: the script grammar of its graph, as the product samples
    the model (`recipe.constrained`, script writers only), else nothing."""
    if not recipe.constrained or recipe.kind != "script":
        return None
    return script_constraint(OpGraph.from_json(program.graph))


def _trainer(recipe, objective, model_path, programs, curriculum, reward, step_log, checkpoints, started,
             stall_report):
    """The GRPOTrainer (DRPO's subclass for "drpo") with the curriculum's sampler, its callbacks (`stall_report`
    armed for each step) and the time limit."""
    import torch
    from datasets import Dataset
    from transformers import AutoTokenizer, LogitsProcessorList, TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from drtriton_training.drpo import DrpoTrainer

    tokenizer = AutoTokenizer.from_pretrained(model_path)
    context = model_context(model_path)
    answerable = answerable_programs(programs, tokenizer, context, recipe, step_log)
    train = [p for p in answerable if p.split == "train"]
    validation = {level: [p for p in answerable if p.split == "validation" and p.level == level]
                  for level in recipe.levels}
    indices_by_level = {level: [i for i, p in enumerate(train) if p.level == level] for level in recipe.levels}
    empty = [level for level, indices in indices_by_level.items() if not indices]
    if empty:
        raise DrtritonError(f"no training program of level {empty[0]} fits the model's context of {context} tokens "
                            f"with {recipe.max_completion_length} to write",
                            "lower max_completion_length (--set), or leave the level out (--set levels=...)")
    dataset = Dataset.from_list([{"prompt": p.prompt, "program_hash": p.hash, "level": p.level} for p in train])
    arguments = GRPOConfig(
        output_dir=str(checkpoints),
        per_device_train_batch_size=recipe.rollouts_per_step,
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        num_generations=recipe.num_generations,
        max_completion_length=recipe.max_completion_length,
        temperature=recipe.temperature,
        beta=recipe.beta,
        learning_rate=recipe.learning_rate,
        lr_scheduler_type="constant_with_warmup",
        warmup_steps=recipe.warmup_steps,
        max_steps=recipe.max_steps,
        save_steps=recipe.save_steps,
        save_total_limit=2,
        logging_steps=1,
        bf16=recipe.bf16,
        use_cpu=recipe.use_cpu,
        model_init_kwargs={"attn_implementation": recipe.attn_implementation},
        use_vllm=recipe.use_vllm,
        vllm_mode=recipe.vllm_mode,
        seed=recipe.seed,
        report_to=[],
        disable_tqdm=True,
        dataloader_num_workers=0,
        remove_unused_columns=False,
        ignore_data_skip=True,  # the curriculum's sampler draws afresh; replaying consumed batches means nothing
    )

    grammars = {program.prompt: ScriptGrammar(constraint) for program in train
                if (constraint := rollout_constraint(program, recipe)) is not None}

    class CurriculumTraining:
        """Prompts from the curriculum's sampler; rollouts held to their program's script grammar (as the product
        samples the model: a free rollout is mostly an unparseable script, which teaches nothing); a step whose
        gradient is not finite leaves the model as it was; checkpoints in shards of `max_shard_size`."""

        def _generate_single_turn(self, prompt_ids, *args, **kwargs):
            started = time.monotonic()
            try:
                return self._held_generate(prompt_ids, *args, **kwargs)
            finally:
                step_log.generation(len(prompt_ids), time.monotonic() - started)

        def _held_generate(self, prompt_ids, *args, **kwargs):
            if not grammars or self.use_vllm:
                return super()._generate_single_turn(prompt_ids, *args, **kwargs)
            from drtriton_lsp.models.constrained_sampling import ConstrainedAnswers

            rows = [grammars.get(self.processing_class.decode(ids, skip_special_tokens=True)) for ids in prompt_ids]
            model = self.accelerator.unwrap_model(self.model_wrapped)
            free_generate = model.generate

            def held_generate(**inputs):  # trl's transformers path calls generate(**inputs, generation_config=...)
                processor = ConstrainedAnswers(self.processing_class, rows, inputs["input_ids"].shape[1])
                return free_generate(**inputs, logits_processor=LogitsProcessorList([processor]))

            model.generate = held_generate
            try:
                return super()._generate_single_turn(prompt_ids, *args, **kwargs)
            finally:
                del model.generate

        def _prepare_inputs(self, generation_batch):
            self.loss_batch = super()._prepare_inputs(generation_batch)  # the rollouts' tensors this step trains on
            return self.loss_batch

        def training_step(self, model, inputs, num_items_in_batch=None):
            loss = super().training_step(model, inputs, num_items_in_batch)
            bad = drop_non_finite_gradients(model)
            if bad:
                step = self.state.global_step + 1
                batch = checkpoints.parent / f"non_finite_step_{step}.pt"
                weights = self.accelerator.unwrap_model(model).state_dict()
                torch.save({"batch": {name: value.detach().cpu() for name, value in self.loss_batch.items()
                                      if isinstance(value, torch.Tensor)},
                            "weights": {name: value.detach().cpu() for name, value in weights.items()}}, batch)
                step_log.skipped_update(step, bad, float(loss), batch)
            return loss

        def _get_train_sampler(self, dataset=None):
            return CurriculumSampler(
                indices_by_level, curriculum, mini_repeat_count=recipe.num_generations,
                batch_size=recipe.prompts_per_step, repeat_count=1,
                batches_per_epoch=max(recipe.max_steps, 1), seed=recipe.seed,
            )

        def _save(self, output_dir=None, state_dict=None):
            if not self.args.should_save:
                return
            output_dir = output_dir or self.args.output_dir
            os.makedirs(output_dir, exist_ok=True)
            model = self.accelerator.unwrap_model(self.model, keep_torch_compile=False)
            model.save_pretrained(output_dir, state_dict=state_dict, max_shard_size=recipe.max_shard_size)
            self.processing_class.save_pretrained(output_dir)

    class CurriculumCallback(TrainerCallback):
        """Measures pass@1 at the start and every `eval_every_steps`, advances the curriculum, saves its state
        beside each checkpoint, ends each chunk with a checkpoint, and reports a step that stalls."""

        def _measure(self, args, state, model):
            advanced = None
            if state.is_world_process_zero:
                summary = measure_level(model, tokenizer, validation[curriculum.level], reward, recipe)
                advanced = curriculum.record(state.global_step, summary["pass@1"], summary["valid_share"])
                step_log.measurement(state.global_step, summary, advanced)
            if args.world_size > 1:
                from accelerate.utils import broadcast_object_list

                [index] = broadcast_object_list([curriculum.index])
                curriculum.index = index

        def on_train_begin(self, args, state, control, model=None, **kwargs):
            if not curriculum.history:
                self._measure(args, state, model)

        def on_step_begin(self, args, state, control, **kwargs):
            stall_report.arm()

        def on_step_end(self, args, state, control, model=None, **kwargs):
            stall_report.disarm()
            if state.global_step % recipe.eval_every_steps == 0:
                self._measure(args, state, model)
            if state.global_step >= state.max_steps:
                control.should_save = True
            return control

        def on_save(self, args, state, control, **kwargs):
            if state.is_world_process_zero:
                curriculum.save(checkpoints / f"checkpoint-{state.global_step}")

    base = DrpoTrainer if objective == "drpo" else GRPOTrainer
    trainer_class = type(f"Curriculum{base.__name__}", (CurriculumTraining, base), {})
    options = {"drpo_lambda": recipe.drpo_lambda} if objective == "drpo" else {}
    time_limit = time_limit_callback(recipe.time_limit_s, started)
    torch.manual_seed(recipe.seed)
    trainer = trainer_class(
        model=str(model_path), reward_funcs=[reward.correctness, reward.speed], args=arguments,
        train_dataset=dataset, processing_class=tokenizer, callbacks=[time_limit, CurriculumCallback()], **options,
    )
    return trainer, time_limit
