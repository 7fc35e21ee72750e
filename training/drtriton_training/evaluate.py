"""`drtriton-train eval`: a trained model on the held-out synthetic sets, judged by the product's verifier.

Per program: k samples from the model (transformers, in this process), the share that parse as valid scripts
(or modules), pass@1 and pass@k by the verifier, and on a GPU the speed of the best verified sample against eager
PyTorch and torch.compile (the product's benchmark worker). Written as JSON and Markdown with what produced it.

Programs are the shipped held-out sets, or (`programs=`) the validation split of an `rl` run's programs.jsonl, which
`program_scale` sized for a GPU (the held-out sets are CPU-sized: on a GPU their timings are mostly launch costs).
With `workers` above 1, that many programs are judged at once (one generate at a time; on a GPU their verifications
share it and each timing holds it alone, through the product's GPU lock).
"""

from __future__ import annotations

import datetime
import hashlib
import json
import math
import platform
import re
import shlex
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from drtriton_lsp.bench.suite import git_commit
from drtriton_lsp.engine.gpus import gpu_slots
from drtriton_lsp.engine.verify import worker_environment
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.models import formats
from drtriton_lsp.models.script_grammar import ScriptConstraint, ScriptGrammar, script_constraint
from drtriton_lsp.runners.local import JobFailure, JobLimits, LocalRunner

from drtriton_training.answer_room import compiler_answer, prompt_problem, token_count
from drtriton_training.programs import HELDOUT_LEVELS, load_heldout
from drtriton_training.sft import MANIFEST
from drtriton_training.teach import TeachOptions, capture_program, verify_module, written_candidate

RESULTS_SCHEMA = "drtriton.train-eval/1"
REPOSITORY = Path(__file__).resolve().parents[2]
MAX_NEW_TOKENS = {"script": 512, "kernel": 4096}
TIMING_KEYS = ("eager_ms", "compile_ms", "triton_ms", "speedup_vs_eager", "speedup_vs_compile")
# What `module_of` says of a script that keeps every op in PyTorch: valid, but no candidate to verify.
NO_KERNEL = "no kernel: the script keeps every op in PyTorch"


@dataclass
class EvalOptions:
    """levels / per_level: the first `per_level` programs of each held-out level; samples: k; kind: "script" or
    "kernel"; temperature: sampling temperature (k > 1) or 0 for greedy (k = 1); device: where the model samples
    and the verifier runs; baseline: also verify (and on a GPU time) the compiler's own default script;
    constrained: hold script answers to the script grammar while sampling, as the product serves the model;
    time_limit_s: start no program after this many seconds (the results then say "partial"); workers: programs
    judged at once; programs: an `rl` run's programs.jsonl, whose validation split (of `levels`) is evaluated instead
    of the shipped held-out sets."""

    levels: tuple[int, ...] = HELDOUT_LEVELS
    per_level: int = 100
    samples: int = 4
    kind: str = "script"
    temperature: float = 0.8
    device: str = "cpu"
    baseline: bool = False
    constrained: bool = True
    time_limit_s: float | None = None
    trials: int = 5
    seed: int = 0
    workers: int = 1
    programs: Path | None = None
    benchmark_limits: JobLimits = field(default_factory=lambda: JobLimits(timeout_s=900))


def pass_at_k(samples: int, correct: int, k: int) -> float:
    """The unbiased pass@k estimate from `samples` draws of which `correct` passed (Chen et al., arXiv 2107.03374)."""
    if samples - correct < k:
        return 1.0
    return 1.0 - math.prod((samples - correct - i) / (samples - i) for i in range(k))


def checkpoint_hash(model_dir: Path) -> str:
    """A hash over the files that define the model (weights, config, tokenizer), so results name the exact model."""
    digest = hashlib.sha256()
    for path in sorted(model_dir.iterdir()):
        if path.is_file() and path.suffix in (".safetensors", ".json") and path.name != MANIFEST:
            digest.update(path.name.encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


class Sampler:
    """A causal LM and its tokenizer, sampling completions of prompts in the model formats: loaded from a
    `drtriton-train sft` model directory (`Sampler.load`, a LoRA adapter on its base included), or a model in memory
    (`rl` evaluates the policy it is training)."""

    def __init__(self, model, tokenizer, device: str, seed: int = 0):
        import torch

        self.torch = torch
        self.device = device
        self.seed = seed
        self.tokenizer = tokenizer
        self.model = model
        self.context = getattr(model.config, "max_position_embeddings", None)

    @classmethod
    def load(cls, model_dir: Path, device: str, seed: int = 0) -> Sampler:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(model_dir)
        if (model_dir / "adapter_config.json").is_file():
            from peft import AutoPeftModelForCausalLM

            model = AutoPeftModelForCausalLM.from_pretrained(model_dir)
        else:
            model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32 if device == "cpu" else None)
        return cls(model.to(device).eval(), tokenizer, device, seed)

    def prompt_problem(self, prompt: str, answer: str) -> str:
        """Why the model cannot answer `prompt` with as many tokens as `answer` takes ("" when it can): the two
        together overflow its context."""
        return prompt_problem(token_count(self.tokenizer, prompt), token_count(self.tokenizer, answer), self.context)

    def complete(
        self, prompt: str, samples: int, temperature: float, max_new_tokens: int,
        constraint: ScriptConstraint | None = None,
    ) -> list[str]:
        """`samples` completions of `prompt`, each cut at the format's end line or the end-of-text token;
        constraint: what the answers are held to while sampled (None: free)."""
        from drtriton_lsp.models.constrained_sampling import constraint_processors

        torch = self.torch
        ids = self.tokenizer(prompt, return_tensors="pt", add_special_tokens=False)["input_ids"].to(self.device)
        if self.context is not None:
            max_new_tokens = min(max_new_tokens, self.context - ids.shape[1])
        if max_new_tokens <= 0:
            return ["" for _ in range(samples)]
        torch.manual_seed(self.seed)
        sampling: dict[str, Any] = {"do_sample": False}
        if temperature > 0:
            sampling = {"do_sample": True, "temperature": temperature, "top_p": 1.0}
        with torch.no_grad():
            output = self.model.generate(
                ids,
                max_new_tokens=max_new_tokens,
                num_return_sequences=samples,
                stop_strings=[formats.END_LINE],
                tokenizer=self.tokenizer,
                pad_token_id=self.tokenizer.pad_token_id or self.tokenizer.eos_token_id,
                logits_processor=constraint_processors(
                    self.tokenizer, [ScriptGrammar(constraint) if constraint else None], samples, ids.shape[1]
                ),
                **sampling,
            )
        return [self.tokenizer.decode(row[ids.shape[1]:], skip_special_tokens=True) for row in output]


def evaluate(model_dir: Path, options: EvalOptions, log=print, sampler: Sampler | None = None) -> dict[str, Any]:
    """Evaluate the model in `model_dir` on the held-out sets; returns the results document.

    sampler: what answers the prompts (default: the model in `model_dir`, loaded here)."""
    if options.kind not in MAX_NEW_TOKENS:
        raise DrtritonError(f"no model kind {options.kind!r}", "evaluate --kind script or --kind kernel")
    if options.temperature <= 0 and options.samples > 1:
        raise DrtritonError("greedy decoding gives one answer, not k", "use --temperature above 0 with --samples > 1")
    if options.workers < 1:
        raise DrtritonError(f"workers must be at least 1, got {options.workers}", "pass --workers 1 or more")
    started = time.monotonic()
    chosen = programs_to_evaluate(options)
    sampler = sampler or Sampler.load(model_dir, options.device, options.seed)
    teach_options = TeachOptions(device=options.device, trials=options.trials)
    sampling = threading.Lock()  # one generate at a time: the model is shared by the programs judged at once

    def evaluate_one(level: int, program) -> dict[str, Any] | None:
        if options.time_limit_s is not None and time.monotonic() - started > options.time_limit_s:
            return None  # started no program after the time limit
        return _evaluate_program(program, level, sampler, options, teach_options, runner, sampling)

    programs: list[dict[str, Any]] = []
    stopped = False
    # samples verified side by side share the GPU through one lock (a timing alone), as bench --jobs does
    sharing = options.workers > 1 and options.device == "cuda"
    with gpu_slots(1, sharing=sharing, gpu_memory_bytes=None) as [place], LocalRunner(extra_env=place.env) as runner, \
            ThreadPoolExecutor(max_workers=options.workers) as pool:
        futures = [(level, program, pool.submit(evaluate_one, level, program)) for level, program in chosen]
        for level, program, future in futures:
            record = future.result()
            if record is None:
                stopped = True
                continue
            programs.append(record)
            log(
                f"level {level} {program.hash}: {record['valid']}/{record['samples']} valid, "
                f"{record['correct']}/{record['samples']} verified"
                + "".join(f" ({record[key]})" for key in ("error", "prompt_too_long") if record.get(key))
            )
    return _results(model_dir, options, programs, stopped, time.monotonic() - started)


def programs_to_evaluate(options: EvalOptions) -> list[tuple[int, Any]]:
    """(level, program) pairs in order: the first `per_level` of each level of the shipped held-out sets, or of the
    validation split of `options.programs` (an `rl` run's programs.jsonl: records with their captured graph)."""
    if options.programs is None:
        return [(level, program) for level in options.levels for program in load_heldout(level)[: options.per_level]]
    from drtriton_training.rewards import RlProgram

    if not options.programs.is_file():
        raise DrtritonError(f"no programs file {options.programs}",
                            "pass --programs with an `rl` run's programs.jsonl (`rl --capture-only --out DIR`)")
    records = [json.loads(line) for line in options.programs.read_text().splitlines() if line.strip()]
    validation = [RlProgram(**{**record, "forward_params": tuple(record["forward_params"])})
                  for record in records if record["split"] == "validation"]
    return [(level, program) for level in options.levels
            for program in [p for p in validation if p.level == level][: options.per_level]]


def _evaluate_program(
    program, level, sampler: Sampler, options: EvalOptions, teach_options, runner, sampling: threading.Lock,
) -> dict[str, Any]:
    record: dict[str, Any] = {"hash": program.hash, "level": level, "samples": options.samples}
    record.update(valid=0, correct=0)
    try:
        capture = _capture(program, runner, teach_options)
    except DrtritonError as error:
        record["error"] = f"capture failed: {error.message}"[:300]
        return record
    if options.kind == "script":
        prompt = formats.script_prompt(capture.graph)
        # what a script answer is judged as (`written_candidate`): the product's written-back module, or the plain
        # ModelNew where the capture's guards were not kept
        record["judged_as"] = "plain" if capture.guards is None else "written back"
    else:
        prompt = formats.kernel_prompt(program.source)
    # a prompt that leaves no room for the compiler's own answer is not the model's failure: reported apart, not cut
    too_long = sampler.prompt_problem(prompt, compiler_answer(capture, options.kind))
    if too_long:
        record["prompt_too_long"] = too_long
        return record
    constraint = script_constraint(capture.graph) if options.kind == "script" and options.constrained else None
    with sampling:
        completions = sampler.complete(
            prompt, options.samples, options.temperature, MAX_NEW_TOKENS[options.kind], constraint=constraint
        )
    verdicts: dict[str, tuple[bool, str | None]] = {}
    rejections: dict[str, int] = {}
    invalid: dict[str, int] = {}
    for completion in completions:
        module, problem = module_of(completion, capture, options.kind)
        if module is None:
            kind_of_problem = re.sub(r"^line [0-9]+: ", "", problem)[:80]
            invalid[kind_of_problem] = invalid.get(kind_of_problem, 0) + 1
            continue
        record["valid"] += 1
        if module not in verdicts:
            verdict = verify_module(capture, module, teach_options, runner, tf32=False, then="verify")
            verdicts[module] = (verdict.verified, verdict.reason)
        verified, reason = verdicts[module]
        if verified:
            record["correct"] += 1
        else:
            rejections[reason or "rejected"] = rejections.get(reason or "rejected", 0) + 1
    record["invalid_reasons"] = invalid
    record["rejections"] = rejections
    record["distinct_valid"] = len(verdicts)
    if options.baseline:
        baseline = written_candidate(capture) if capture.program.kernels else None
        record["baseline_verified"] = (
            verify_module(capture, baseline, teach_options, runner, tf32=capture.program.tf32, then="capture").verified
            if baseline else None
        )
    if options.device == "cuda":
        verified_modules = [module for module, (ok, _) in verdicts.items() if ok]
        record["timing"] = _best_timing(capture, verified_modules, options, runner)
        if options.baseline and record.get("baseline_verified"):
            record["baseline_timing"] = _best_timing(capture, [baseline], options, runner)
    return record


def _capture(program, runner, teach_options):
    """The program captured: from the graph an `rl` run captured (its programs.jsonl), else in a capture worker."""
    if getattr(program, "graph", None) is not None:
        from drtriton_training.rewards import capture_of_record

        return capture_of_record(program)
    return capture_program(program.source, runner, teach_options.capture_limits, teach_options.device)


def module_of(completion: str, capture, kind: str) -> tuple[str | None, str]:
    """The ModelNew module an answer stands for (scripts are decoded by the compiler), or why there is none."""
    if kind == "kernel":
        answer = formats.extract_kernel_answer(completion)
        return answer.source, answer.error
    answer = formats.parse_script_answer(completion, capture.graph)
    if not answer.valid:
        return None, answer.error
    from drtriton_lsp.compiler.codegen import compile_graph
    from drtriton_lsp.compiler.planner import with_default_replay

    # as the product takes a model's script: replayed as CUDA graphs by default from enough steps
    program = compile_graph(
        capture.graph, prefix="model", forward_params=capture.forward_params, has_self=True,
        schedule=with_default_replay(answer.script, capture.graph),
    )
    if not program.kernels:
        return None, NO_KERNEL
    return written_candidate(capture, program), ""


def _best_timing(capture, modules: list[str], options: EvalOptions, runner) -> dict[str, Any] | None:
    """The product's benchmark (eager, torch.compile, Triton on the GPU) of the fastest of the verified modules.

    Of several, the fastest is picked by the product's `time_candidates` (eager and every module timed in one worker,
    no torch.compile), then benchmarked afresh: one torch.compile and two workers per program instead of one of each
    per module, and the figure reported is not the minimum of the measurements it was picked by. Should that timing
    fail, each module is benchmarked and the fastest kept, as before."""
    if not modules:
        return None
    chosen = fastest_module(capture, modules, options.benchmark_limits, runner) if len(modules) > 1 else modules[0]
    if chosen is not None:
        timing = benchmark_module(capture, chosen, options.benchmark_limits, runner)
        if timing:
            return {**timing, "chosen_from": len(modules)}
    best = None
    for module in modules:
        timing = benchmark_module(capture, module, options.benchmark_limits, runner)
        if timing and (best is None or timing["triton_ms"] < best["triton_ms"]):
            best = {**timing, "chosen_from": len(modules)}
    return best


def time_modules(capture, modules: list[str], limits: JobLimits, runner) -> dict[str, Any]:
    """The product's `time_candidates` worker on the GPU: eager's median device time (`reference_ms`) and each
    module's (`candidate_ms`), the same inputs for all, the L2 flushed before each call, no torch.compile; or
    {"error": why} when the worker failed."""
    try:
        return runner.call(
            "time_candidates", {"task": capture.task.to_json(), "candidates": modules},
            limits=limits, env=worker_environment("cuda"),
        )
    except JobFailure as failure:
        return {"error": f"{failure.reason}: {failure.detail}"[:300]}


def fastest_module(capture, modules: list[str], limits: JobLimits, runner) -> str | None:
    """The module of `modules` with the shortest median device time (`time_modules`), or None when the worker
    failed."""
    times = time_modules(capture, modules, limits, runner).get("candidate_ms") or []
    if len(times) != len(modules) or not all(isinstance(ms, (int, float)) and ms > 0 for ms in times):
        return None
    return modules[min(range(len(modules)), key=times.__getitem__)]


def benchmark_module(capture, module: str, limits: JobLimits, runner) -> dict[str, Any] | None:
    """The product's benchmark worker on the GPU: eager PyTorch, torch.compile and the module's Triton kernels
    (`TIMING_KEYS`), or None when the worker failed or timed nothing."""
    try:
        measured = runner.call(
            "benchmark", {"task": capture.task.to_json(), "candidate": module},
            limits=limits, env=worker_environment("cuda"),
        )
    except JobFailure:
        return None
    timing = measured.get("timing")
    return {key: timing.get(key) for key in TIMING_KEYS} if timing else None


def geometric_mean(values: list[float]) -> float | None:
    values = [value for value in values if value and value > 0]
    return math.exp(statistics.fmean(math.log(value) for value in values)) if values else None


def level_summary(records: list[dict[str, Any]], samples: int) -> dict[str, Any]:
    """Valid share, pass@1 and pass@k (k = `samples`) of per-program records (`samples`, `valid`, `correct`; those
    with an `error` are counted as capture errors, those with `prompt_too_long` as programs the model has no room to
    answer), with the baseline and timing summaries where recorded."""
    judged = [record for record in records if "error" not in record and "prompt_too_long" not in record]
    total = sum(record["samples"] for record in judged)

    def mean_pass_at(k: int) -> float | None:
        return statistics.fmean(pass_at_k(r["samples"], r["correct"], k) for r in judged) if judged else None

    summary: dict[str, Any] = {
        "programs": len(records),
        "capture_errors": sum("error" in record for record in records),
        "prompt_too_long": sum("prompt_too_long" in record for record in records),
        "valid_share": sum(record["valid"] for record in judged) / total if total else None,
        "pass@1": mean_pass_at(1),
        f"pass@{samples}": mean_pass_at(samples),
    }
    if any("baseline_verified" in record for record in judged):
        with_kernels = [record for record in judged if record.get("baseline_verified") is not None]
        summary["compiler_default_verified_share"] = (
            sum(bool(record["baseline_verified"]) for record in with_kernels) / len(judged) if judged else None
        )
    timed = [record["timing"] for record in judged if record.get("timing")]
    if any("timing" in record for record in judged):
        summary["timed"] = len(timed)
        summary["best_of_k_geomean_vs_eager"] = geometric_mean([t["speedup_vs_eager"] for t in timed])
        summary["best_of_k_geomean_vs_compile"] = geometric_mean([t["speedup_vs_compile"] for t in timed])
        summary["share_faster_than_eager"] = (
            sum((t["speedup_vs_eager"] or 0) > 1 for t in timed) / len(judged) if judged else None
        )
        summary["share_faster_than_compile"] = (
            sum((t["speedup_vs_compile"] or 0) > 1 for t in timed) / len(judged) if judged else None
        )
    baseline_timed = [record["baseline_timing"] for record in judged if record.get("baseline_timing")]
    if baseline_timed:
        summary["compiler_default_geomean_vs_compile"] = geometric_mean([t["speedup_vs_compile"] for t in baseline_timed])
        summary["compiler_default_share_faster_than_compile"] = (
            sum((t["speedup_vs_compile"] or 0) > 1 for t in baseline_timed) / len(judged)
        )
    return summary


def _results(model_dir: Path, options: EvalOptions, programs, stopped: bool, seconds: float) -> dict[str, Any]:
    manifest_path = model_dir / MANIFEST
    manifest = json.loads(manifest_path.read_text()) if manifest_path.is_file() else {}
    by_level = {
        str(level): level_summary([record for record in programs if record["level"] == level], options.samples)
        for level in options.levels
    }
    return {
        "schema": RESULTS_SCHEMA,
        **provenance(options.device),
        "model": {
            "directory": str(model_dir),
            "checkpoint_hash": checkpoint_hash(model_dir),
            "steps": manifest.get("steps"),
            "recipe": (manifest.get("recipe") or {}).get("name"),
            "format": manifest.get("format"),
        },
        "options": {
            "kind": options.kind, "levels": list(options.levels), "per_level": options.per_level,
            "samples": options.samples, "temperature": options.temperature, "device": options.device,
            "trials": options.trials, "baseline": options.baseline,
            "constrained": options.constrained and options.kind == "script",
            "workers": options.workers,
            "programs": str(options.programs) if options.programs else "held-out",
        },
        "partial": stopped,
        "seconds": round(seconds, 1),
        "overall": level_summary(programs, options.samples),
        "by_level": by_level,
        "programs": programs,
    }


def provenance(device: str) -> dict[str, Any]:
    """What produced a results file: the command line, the commit, when, and the machine."""
    return {
        "command": shlex.join(["drtriton-train", *sys.argv[1:]]) if sys.argv and sys.argv[0] else None,
        "commit": repository_commit(),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine_description(device),
    }


def repository_commit() -> str:
    """$DRTRITON_COMMIT if set (a copy of the tree), else this repository's commit and whether files changed."""
    return git_commit(REPOSITORY)


def machine_description(device: str) -> dict[str, Any]:
    import torch
    import transformers

    machine = {
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "device": device,
    }
    if device == "cuda" and torch.cuda.is_available():
        machine["gpu"] = torch.cuda.get_device_name(0)
    return machine


def to_markdown(results: dict[str, Any]) -> str:
    """The results as a Markdown table per level, with what produced them."""
    options, model = results["options"], results["model"]
    k = options["samples"]
    source = options.get("programs", "held-out")  # results written before the option existed: held-out
    lines = [
        f"# Held-out evaluation: {model['recipe'] or 'model'} ({options['kind']} writer)",
        "",
        f"- command: `{results['command']}`",
        f"- commit: {results['commit']}",
        f"- checkpoint: {model['directory']} (hash {model['checkpoint_hash']}, {model['steps']} steps, "
        f"format {model['format']})",
        f"- machine: {results['machine'].get('gpu') or results['machine']['platform']}, torch "
        f"{results['machine']['torch']}; verification on {options['device']}",
        f"- {options['per_level']} programs per level, k = {k} samples at temperature {options['temperature']}"
        + (", held to the script grammar while sampled" if options.get("constrained") else ", sampled freely")
        + f"; {results['seconds']} s" + (" (stopped at the time limit: partial)" if results["partial"] else ""),
        "- programs: " + ("the shipped held-out sets" if source == "held-out" else f"the validation split of {source}")
        + (f"; {options['workers']} judged at once" if options.get("workers", 1) > 1 else ""),
        "",
    ]
    plain = sum(record.get("judged_as") == "plain" for record in results["programs"])
    if plain:
        lines[-1:-1] = [
            f"- {plain} of {len(results['programs'])} programs judged their script answers as the plain ModelNew "
            "(captured before guards were kept: no written dispatch, no CUDA-graph replay in their timings)",
        ]
    if "best_of_k_geomean_vs_eager" in results["overall"]:
        lines[-1:-1] = [
            "- speed: the fastest verified sample of each program (picked by the product's time_candidates when "
            "several verified, then timed afresh by its benchmark: eager, torch.compile, Triton, CUDA events, L2 "
            "flushed); a share faster counts every program, those with no verified sample as not faster",
        ]
    columns = ["programs", "valid_share", "pass@1", f"pass@{k}"]
    columns += ["prompt_too_long"] if results["overall"].get("prompt_too_long") else []
    extra = [
        "compiler_default_verified_share", "best_of_k_geomean_vs_eager", "best_of_k_geomean_vs_compile",
        "share_faster_than_eager", "share_faster_than_compile", "compiler_default_geomean_vs_compile",
        "compiler_default_share_faster_than_compile",
    ]
    columns += [name for name in extra if name in results["overall"]]
    lines.append("| level | " + " | ".join(columns) + " |")
    lines.append("|" + "---|" * (len(columns) + 1))
    rows = [*results["by_level"].items(), ("all", results["overall"])]
    for level, summary in rows:
        cells = [table_cell(summary.get(name)) for name in columns]
        lines.append(f"| {level} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def table_cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def write_results(
    results: dict[str, Any], directory: Path, name: str, render: Callable[[dict[str, Any]], str] = to_markdown
) -> tuple[Path, Path]:
    """`NAME.json` and `NAME.md` (the results rendered by `render`) in `directory`."""
    directory.mkdir(parents=True, exist_ok=True)
    json_path, markdown_path = directory / f"{name}.json", directory / f"{name}.md"
    json_path.write_text(json.dumps(results, indent=1) + "\n")
    markdown_path.write_text(render(results))
    return json_path, markdown_path
