"""The Task: one optimization problem in KernelBench form, plus where it came from.

A Task's `source` is a self-contained module defining `class Model(nn.Module)`, `get_inputs()`
and `get_init_inputs()`. Only worker processes execute it (`load_task_module`); the parent
handles it as text.
"""

from __future__ import annotations

import importlib.util
import sys
import types
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class LineMapping:
    """Lines [task_start, task_start + count) of the Task came from [origin_start, ...) of the user's file."""

    task_start: int
    origin_start: int
    count: int


@dataclass(frozen=True)
class Task:
    """A KernelBench-form problem.

    name: the target's name in the user's file ("MLPBlock"), or the task file's stem.
    kind: "module" for an nn.Module target, "function" for a top-level function target.
    origin_path: the user's file the task was extracted from (None for a task file given directly).
    line_map: how Task lines map back to the user's file, for error messages.
    inputs_from: "get_inputs" | "pragma" | "task_file" — where the example inputs came from.
    """

    name: str
    kind: str
    source: str
    origin_path: str | None = None
    line_map: tuple[LineMapping, ...] = field(default_factory=tuple)
    inputs_from: str = "task_file"

    def origin_line(self, task_line: int) -> int | None:
        """The user's line for a Task line, or None if that line was generated."""
        for mapping in self.line_map:
            if mapping.task_start <= task_line < mapping.task_start + mapping.count:
                return mapping.origin_start + (task_line - mapping.task_start)
        return None

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "kind": self.kind,
            "source": self.source,
            "origin_path": self.origin_path,
            "line_map": [[m.task_start, m.origin_start, m.count] for m in self.line_map],
            "inputs_from": self.inputs_from,
        }

    @classmethod
    def from_json(cls, data: dict) -> "Task":
        return cls(
            name=data["name"],
            kind=data["kind"],
            source=data["source"],
            origin_path=data.get("origin_path"),
            line_map=tuple(LineMapping(*m) for m in data.get("line_map", [])),
            inputs_from=data.get("inputs_from", "task_file"),
        )

    @classmethod
    def from_file(cls, path: str | Path) -> "Task":
        """A task file already in KernelBench form (e.g. for `drtriton verify`)."""
        path = Path(path)
        return cls(name=path.stem, kind="module", source=path.read_text(), origin_path=str(path))


def load_module_from_source(source: str, module_name: str, directory: Path) -> types.ModuleType:
    """Execute `source` as a module named `module_name`, written to `directory` so that
    tracebacks, `inspect.getsource` and `torch.export` stack traces point at real lines.

    Worker processes only: this runs user or generated code.
    """
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{module_name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    spec.loader.exec_module(module)
    return module
