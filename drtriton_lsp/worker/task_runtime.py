"""Worker-side helpers that bring a Task to life: import it, build the model, draw inputs.

Every failure of the user's own code (an import error, an exception in `__init__` or in
`get_inputs`) becomes a DrtritonError that names the line in the user's file.
"""

from __future__ import annotations

import tempfile
import traceback
import types
from pathlib import Path
from typing import Any

import torch

from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.task import Task, load_module_from_source

TASK_MODULE_NAME = "drtriton_task"
CANDIDATE_MODULE_NAME = "drtriton_candidate"


def scratch_directory() -> Path:
    """A private directory for this worker's generated files (removed with the process's tmp)."""
    return Path(tempfile.mkdtemp(prefix="drtriton-worker-"))


def load_task(task: Task, directory: Path) -> types.ModuleType:
    return _run_user_code(task, directory, "importing the task", lambda: load_module_from_source(
        task.source, TASK_MODULE_NAME, directory))


def task_file(directory: Path) -> Path:
    return directory / f"{TASK_MODULE_NAME}.py"


def build_model(task: Task, module: types.ModuleType, directory: Path, seed: int) -> torch.nn.Module:
    """`Model(*get_init_inputs())` with the global seed set first, in eval mode."""

    def build() -> torch.nn.Module:
        init_inputs = module.get_init_inputs() if hasattr(module, "get_init_inputs") else []
        torch.manual_seed(seed)
        return module.Model(*init_inputs).eval()

    return _run_user_code(task, directory, "building the model", build)


def draw_inputs(task: Task, module: types.ModuleType, directory: Path, seed: int) -> list[Any]:
    """A fresh `get_inputs()` draw under `seed`."""
    if not hasattr(module, "get_inputs"):
        raise DrtritonError(
            f"{task.name} has no get_inputs()",
            "define get_inputs() returning example inputs, or add a '# drtriton: inputs = [...]' comment",
            path=task.origin_path,
        )

    def draw() -> list[Any]:
        torch.manual_seed(seed)
        return list(module.get_inputs())

    return _run_user_code(task, directory, "drawing example inputs", draw)


def _run_user_code(task: Task, directory: Path, doing: str, action):
    try:
        return action()
    except DrtritonError:
        raise
    except Exception as error:  # noqa: BLE001 - the user's code failed; say where
        line = user_line_of(error, task, task_file(directory))
        raise DrtritonError(
            f"{type(error).__name__} while {doing}: {error}",
            "fix the code at the line named here (it ran in a drtriton worker process)",
            path=task.origin_path,
            line=line,
        ) from error


def user_line_of(error: BaseException, task: Task, path: Path) -> int | None:
    """The user's line of the innermost task frame in the error's traceback."""
    frames = [frame for frame in traceback.extract_tb(error.__traceback__) if Path(frame.filename) == path]
    if not frames or frames[-1].lineno is None:
        return None
    task_line = frames[-1].lineno
    return task.origin_line(task_line) if task.line_map else task_line


def precision_settings() -> dict[str, Any]:
    """The float32 precision settings of this process, the user's once their module is imported (it may set them):
    for the candidate's process, and for the search's choice of TF32 (engine/search.py's `tf32_allowed`)."""
    return {
        "matmul_allow_tf32": torch.backends.cuda.matmul.allow_tf32,
        "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
    }
