"""Helpers shared by the template tests: capture a module quietly, compile a graph under a script, and
the default schedule with one search alternative chosen, as a search that timed it fastest would."""

from __future__ import annotations

import warnings
from typing import Callable

from torch import nn

from drtriton_lsp.compiler.codegen import CompiledProgram, compile_graph
from drtriton_lsp.compiler.fragments import search_steps, step_alternatives
from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.compiler.planner import default_schedule
from drtriton_lsp.compiler.script import KernelLine, Schedule, print_schedule
from drtriton_lsp.engine.search import assemble
from drtriton_lsp.worker.capture import capture_graph


def capture(model: nn.Module, inputs: tuple) -> OpGraph:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return capture_graph(model.eval(), inputs)


def compile_with(graph: OpGraph, schedule: str | None = None) -> CompiledProgram:
    params = [graph_input.target for graph_input in graph.inputs if graph_input.kind == "user_input"]
    return compile_graph(graph, prefix="model", forward_params=params, has_self=True, schedule=schedule)


def schedule_choosing(
    graph: OpGraph,
    alternative: str,
    rewrite: Callable[[KernelLine], KernelLine] | None = None,
    required: bool = False,
) -> str:
    """The default schedule with the search's `alternative` chosen wherever it is offered (each of its lines
    passed through `rewrite` if given). required: assert that it is offered somewhere."""
    base = default_schedule(graph)
    replacements: dict[int, str] = {}
    for step in search_steps(graph, base):
        alternatives = dict(step_alternatives(graph, step))
        if alternative in alternatives:
            lines = alternatives[alternative]
            if rewrite is not None:
                lines = tuple(rewrite(line) for line in lines)
            replacements |= {position: "" for position in step.positions}
            replacements[step.positions[-1]] = print_schedule(Schedule(tuple(lines)))
    if required:
        assert replacements, f"the search offers no {alternative} kernel"
    return print_schedule(assemble(base, replacements))
