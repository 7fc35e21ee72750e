"""The worker's `capture` method: import a Task, build its model, export it to an OpGraph.

Also says when the sizes could not be left free (`capture_note`), and records what the graph is specialised on (the guards write-back puts in the dispatch), among
them whether the model computes differently in training mode (dropout, batch norm, `self.training`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import torch

from drtriton_lsp.errors import CaptureError
from drtriton_lsp.task import Task
from drtriton_lsp.worker.capture import capture, capture_graph
from drtriton_lsp.worker.devices import describe_devices
from drtriton_lsp.worker.gpu_lock import gpu_hold
from drtriton_lsp.worker.specialization import record_guards
from drtriton_lsp.worker.task_runtime import (
    build_model,
    draw_inputs,
    load_task,
    precision_settings,
    scratch_directory,
    task_file,
)

MODE_DEPENDENT_MODULES = (
    torch.nn.modules.dropout._DropoutNd,
    torch.nn.modules.batchnorm._BatchNorm,
    torch.nn.modules.instancenorm._InstanceNorm,
)


def run_capture(params: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    """Capture the task's graph. Beside other jobs on one GPU (bench --jobs N) it holds the GPU lock shared, as a
    verification does: a capture's CPU work (drawing large inputs, torch.export) never runs during another
    problem's timing, whose host-bound calls it would slow."""
    with gpu_hold(exclusive=False):
        return _capture(params, progress)


def _capture(params: dict[str, Any], progress: Callable[[str], None]) -> dict[str, Any]:
    task = Task.from_json(params["task"])
    directory = scratch_directory()
    progress("importing the task")
    module = load_task(task, directory)
    model = build_model(task, module, directory, seed=params.get("seed", 0))
    inputs = draw_inputs(task, module, directory, seed=params.get("seed", 0))
    progress("running torch.export")
    try:
        with torch.no_grad():
            captured = capture(model, tuple(inputs), task_file(directory))
    except CaptureError as error:
        error.path = task.origin_path
        if error.line is not None and task.line_map:
            error.line = task.origin_line(error.line)
        raise
    graph = captured.graph
    if captured.static_note:
        progress(captured.static_note)
    is_method = task.kind == "module"
    mode_dependent = any(isinstance(sub, MODE_DEPENDENT_MODULES) for sub in model.modules()) or any(
        "dropout" in node.op or "batch_norm" in node.op for node in graph.nodes
    )
    if is_method and not mode_dependent:
        progress("running torch.export again in training mode")
        static_graph = graph if captured.static_note else None
        mode_dependent = _differs_in_training_mode(model, inputs, static_graph, task_file(directory))
    guards = record_guards(model, module, inputs, graph, mode_dependent, is_method)
    for node in graph.nodes:
        if node.source_line is not None and task.line_map:
            object.__setattr__(node, "source_line", task.origin_line(node.source_line))
    return {
        "graph": graph.to_json(), "guards": guards, "devices": describe_devices(), "capture_note": captured.static_note,
        # the signatures of the graph's ops, so the caller plans and lowers kernels without importing torch
        "schemas": captured.schemas,
        # the user's float32 precision settings once their module is imported: which kernels may use TF32
        "precision": precision_settings(),
    }


def _differs_in_training_mode(model: torch.nn.Module, inputs: list[Any], static_graph, source: Path) -> bool:
    """Whether the model captured in training mode gives another graph (or none): then the kernels,
    captured in eval mode, are right only in eval mode. Both modes are captured at the example sizes (a capture
    with free sizes takes several times longer, and the mode shows at any size); static_graph: the eval-mode
    capture when it already is at the example sizes."""
    try:
        with torch.no_grad():
            evaluated = static_graph if static_graph is not None else capture_graph(
                model, tuple(inputs), source, free_sizes=False
            )
            model.train()
            trained = capture_graph(model, tuple(inputs), source, free_sizes=False)
    except CaptureError:
        return True
    finally:
        model.eval()
    return trained.to_json() != evaluated.to_json()
