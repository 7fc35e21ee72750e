"""How much memory a verification or benchmark worker may hold: derived from the task's own tensors and the machine.

A fixed cap refused correct kernels for large single ops (a 6.4 GB input) and stopped the benchmark of a whole network
(its kernels' compilation) while a small task needs far less; the cap here grows with the bytes the task's inputs,
weights and outputs take and with its number of ops (known once the graph is captured) and never falls
below the fixed cap it replaces; the machine that runs the worker bounds it by its share of memory (so a hog is still
stopped): `JobLimits.memory_cap` in runners/runner.py, computed where the worker runs (an ssh runner's remote host).
"""

from __future__ import annotations

import dataclasses

from drtriton_lsp.compiler.graph import OpGraph, example_bytes
from drtriton_lsp.runners.runner import JobLimits

# torch, the CUDA context and Triton in the judge's and the candidate's processes, before any tensor of the task
RUNTIME_BYTES = 4 * 1024**3
# copies of the task's tensors a verification holds at once, at most: the inputs in the judge and in the candidate's
# process, the reference's and the candidate's outputs, their float64 copies for the arbiter (two to four times the
# bytes of float32 and half-precision tensors), and the audit's copies of what a launch may write
TENSOR_COPIES = 12
# compiling the graph's kernels in the benchmark worker (torch.compile's and ours), per op of the graph: on the H200 the
# benchmark of an 85-op network (mobilenet_v2_small, 42 MB of tensors) held 8.4 GiB
COMPILE_BYTES_PER_OP = 96 * 1024**2
# the fixed cap this replaces: a task that fitted under it still does
FLOOR_BYTES = 8 * 1024**3


def task_bytes(graph: OpGraph) -> int:
    """Bytes of the graph's inputs (user inputs, parameters, buffers) and outputs at the example sizes."""
    specs = [graph_input.spec for graph_input in graph.inputs if graph_input.spec is not None]
    specs += [spec for spec in map(graph.spec_of, graph.output_values()) if spec is not None]
    return sum(example_bytes(spec, graph.symbol_hints) for spec in specs)


def task_memory_cap(graph: OpGraph) -> int:
    """The resident bytes a worker verifying or timing this task needs, at least FLOOR_BYTES (see the module
    docstring: the worker's machine bounds it): the runtime, copies of the task's tensors, compiling its ops' kernels."""
    return max(FLOOR_BYTES, RUNTIME_BYTES + TENSOR_COPIES * task_bytes(graph) + COMPILE_BYTES_PER_OP * len(graph.nodes))


def with_task_memory_caps(limits: JobLimits, graph: OpGraph) -> JobLimits:
    """`limits` with the task's memory cap where they set none (a cap given explicitly stands)."""
    if limits.memory_bytes is not None:
        return limits
    return dataclasses.replace(limits, memory_bytes=task_memory_cap(graph))
