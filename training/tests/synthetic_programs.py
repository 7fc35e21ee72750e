"""Helpers for the training package's tests: build and run a generated program.

`load_program` executes a program's source the way KernelBench does (Model, get_inputs).
"""

from __future__ import annotations

import torch


def load_program(source: str) -> tuple[torch.nn.Module, list]:
    namespace: dict = {}
    exec(compile(source, "<synthetic program>", "exec"), namespace)
    torch.manual_seed(0)
    model = namespace["Model"](*namespace["get_init_inputs"]())
    return model, namespace["get_inputs"]()


def output_shapes(result) -> list[tuple[int, ...]]:
    results = result if isinstance(result, tuple) else (result,)
    return [tuple(tensor.shape) for tensor in results]
