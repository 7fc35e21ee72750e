"""The language server's settings: every option documented once, here, with its default.

Read from initializationOptions and `workspace/configuration` (section "drtriton"); bad values fall back to defaults.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from drtriton_lsp.engine.devices import DeviceOption
from drtriton_lsp.models.settings import ModelSettings, parse_model_settings, setting_problem
from drtriton_lsp.runners.ssh import DEFAULT_REMOTE_PYTHON, remote_problem

SECTION = "drtriton"
# How the engine names the device option when it refuses one: this setting, not the CLI's --device.
DEVICE_SETTING = DeviceOption(
    chosen=f"the {SECTION}.device setting is {{device}}", change=f"set {SECTION}.device to {{device}}"
)


@dataclass(frozen=True)
class Settings:
    """What the server does and where it runs jobs. Each field's `doc` is rendered in docs/settings.md."""

    device: str = field(
        default="auto",
        metadata={
            "choices": ("auto", "cpu", "cuda"),
            "doc": "Where generated kernels are verified and timed. `auto`: the GPU if the worker sees one, "
            "else the CPU under Triton's interpreter (verified, but no speed claim). `cuda` without a GPU "
            "is reported as an error when a job starts.",
        },
    )
    remote: str = field(
        default="",
        metadata={
            "values": "`\"\"` \\| `ssh://[user@]host[:port]`",
            "check": remote_problem,
            "doc": "Run every job's workers on a GPU host over ssh: `ssh://[user@]host[:port]`, or a host alias from "
            "your ssh config (`ssh://gpu-box`). drtriton must be installed there (see `remotePython`). Uses your "
            "`ssh` client, config and agent, and never prompts: the host's key must be known and your key loaded. "
            "Your task's source travels over the ssh session; modules beside your file must be installed there too. "
            "Empty: workers run on this machine.",
        },
    )
    remotePython: str = field(
        default=DEFAULT_REMOTE_PYTHON,
        metadata={
            "values": "a command or path on the remote host",
            "check": lambda value: "" if value.strip() and value.isprintable() else "is empty or not printable",
            "doc": "With `remote`: the remote host's Python whose environment has drtriton installed, the same version "
            "as here (e.g. `~/venvs/drtriton/bin/python`).",
        },
    )
    onSave: str = field(
        default="hint",
        metadata={
            "choices": ("off", "hint", "search"),
            "doc": "What saving a file does. `off`: nothing. `hint`: a cheap static analysis (no code runs) "
            "marks chains of elementwise ops that would fuse into one kernel, as Hint diagnostics. "
            "`search`: the hints, plus a background generate job for each target with example inputs "
            "and no current result.",
        },
    )
    trials: int = field(
        default=5,
        metadata={
            "minimum": 1,
            "doc": "Verification trials with fresh random inputs per candidate (KernelBench uses 5). "
            "Fewer is faster and weaker evidence.",
        },
    )
    warmWorker: bool = field(
        default=True,
        metadata={
            "doc": "Keep two worker processes started ahead for the next job on a file whose targets are shown "
            "(one for its capture, one for its verification), so its steps start at once instead of after "
            "importing torch and torch.export (a cold start of several seconds each). They run none of your "
            "code until a job hands them some, and hold about 400 MB each while they wait (the verification's, "
            "on a GPU, also a CUDA context); they end with the server. `false`: each job starts its workers.",
        },
    )
    writeTests: bool = field(
        default=False,
        metadata={
            "doc": "When applying a kernel, also write a pytest file beside the file (or in its `tests/` folder) "
            "that compares the kernels with the original forward at the example inputs, other sizes, other "
            "scalars, float64 and non-contiguous inputs (on CUDA when present, else under Triton's interpreter). "
            "drtriton runs it in a subprocess against the new text first, and applies nothing if it fails.",
        },
    )
    writeBack: str = field(
        default="inline",
        metadata={
            "choices": ("inline",),
            "doc": "How `drtriton: Apply verified kernel` writes a kernel: `inline` puts the kernels in a "
            "marked block above the target and adds one `@drtriton_dispatch` decorator to its forward "
            "(one undoable edit).",
        },
    )
    # `drtriton.model.*`: an object of its own (models/settings.py documents each field)
    model: ModelSettings = field(default_factory=ModelSettings)


def parse_settings(base: Settings, raw: Any) -> tuple[Settings, list[str]]:
    """`base` updated with the recognised values in `raw`; plus one problem line per rejected value."""
    if raw is None:
        return base, []
    if not isinstance(raw, dict):
        return base, [f"drtriton settings must be an object, not {type(raw).__name__}; using the defaults"]
    known = {f.name: f for f in dataclasses.fields(Settings)}
    changes: dict[str, Any] = {}
    problems = []
    for name, value in raw.items():
        definition = known.get(name)
        if name == "model":
            changes[name], model_problems = parse_model_settings(value, f"{SECTION}.model")
            problems.extend(model_problems)
            continue
        if definition is None:
            problems.append(f"unknown drtriton setting {name!r} (known: {', '.join(known)}); ignored")
            continue
        problem = setting_problem(definition, value)
        if problem:
            problems.append(f"drtriton setting {name} = {value!r} {problem}; using {definition.default!r}")
            changes[name] = definition.default
        else:
            changes[name] = value
    return dataclasses.replace(base, **changes), problems


def settings_documentation() -> str:
    """A Markdown table of every setting: name, default, allowed values, effect."""
    rows = ["| setting | default | values | effect |", "|---|---|---|---|"]
    definitions = [(entry.name, entry) for entry in dataclasses.fields(Settings) if entry.name != "model"]
    definitions += [(f"model.{definition.name}", definition) for definition in dataclasses.fields(ModelSettings)]
    for name, definition in definitions:
        choices = definition.metadata.get("choices")
        if isinstance(definition.default, bool):
            choices, default = ("true", "false"), str(definition.default).lower()
        else:
            default = definition.default if definition.default != "" else '""'
        if choices:
            values = " \\| ".join(f"`{choice}`" for choice in choices)
        else:
            values = definition.metadata.get("values")
            if values is None:
                values = f"integer ≥ {definition.metadata['minimum']}" if "minimum" in definition.metadata else "text"
        rows.append(f"| `{SECTION}.{name}` | `{default}` | {values} | {definition.metadata['doc']} |")
    return "\n".join(rows)
