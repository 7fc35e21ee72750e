"""Render a solved CSP-DAG as a KernelBench-form module: `Model`, `get_inputs`, `get_init_inputs`.

Parameters become `nn.Module` submodules or `nn.Parameter`s built in `__init__` (as real model
code has them); every tensor the DAG creates becomes a `get_inputs` entry. A float16 or bfloat16
program casts its module to that dtype at the end of `__init__` and creates its inputs in it.
"""

from __future__ import annotations

import math
from collections import Counter

from drtriton_training.csp_dag import CreateOp, Program
from drtriton_training.registry import Emission, OperatorRegistry

INPUT_NAMES = ("x", "y", "z", "w")


def render_program(program: Program, registry: OperatorRegistry) -> str:
    steps = program.dag.steps
    names: dict[int, str] = {}
    float_inputs = target_inputs = 0
    for index, step in enumerate(steps):
        if isinstance(step, CreateOp) and step.dtype != "int64":
            names[index] = INPUT_NAMES[float_inputs] if float_inputs < len(INPUT_NAMES) else f"x{float_inputs}"
            float_inputs += 1
        elif isinstance(step, CreateOp):
            names[index] = "target" if target_inputs == 0 else f"target{target_inputs}"
            target_inputs += 1
    init_lines: list[str] = []
    forward_lines: list[str] = []
    attribute_counts: Counter[str] = Counter()
    for position, (index, step) in enumerate(program.compute_steps, start=1):
        operator = registry[step.operator]
        attribute = ""
        if operator.has_parameters:
            attribute_counts[operator.attribute_prefix] += 1
            attribute = f"{operator.attribute_prefix}{attribute_counts[operator.attribute_prefix]}"
        emission = Emission(
            args=tuple(names[i] for i in step.inputs),
            attrs=step.attrs,
            inputs=tuple(program.shapes[i] for i in step.inputs),
            output=program.shapes[index],
            parameters=program.parameters[index],
            attribute=f"self.{attribute}",
            values=program.values[index],
        )
        if operator.has_parameters:
            init_lines.append(f"        self.{attribute} = {operator.constructor(emission)}")
        names[index] = f"h{position}"
        forward_lines.append(f"        {names[index]} = {operator.forward(emission)}")
    half_precision = program.dtype != "float32"
    if half_precision and init_lines:
        init_lines.append(f"        self.to(torch.{program.dtype})")
    outputs = program.dag.outputs()
    input_ids = [i for i, step in enumerate(steps) if isinstance(step, CreateOp)]
    ops = " -> ".join(step.operator for _, step in program.compute_steps)
    described = f"level {program.level}, seed {program.seed}" + (f", {program.dtype}" if half_precision else "")
    dtype_argument = f", dtype=torch.{program.dtype}" if half_precision else ""
    lines = [
        f'"""Synthetic program (CSP-DAG {described}): {ops}."""',
        "",
        "import torch",
        "import torch.nn as nn",
        "import torch.nn.functional as F",
        "",
        "",
        "class Model(nn.Module):",
        "    def __init__(self):",
        "        super().__init__()",
        *init_lines,
        "",
        f"    def forward(self, {', '.join(names[i] for i in input_ids)}):",
        *forward_lines,
        f"        return {', '.join(names[i] for i in outputs)}",
        "",
        "",
        "def get_inputs():",
    ]
    for index in input_ids:
        step = steps[index]
        shape = program.shapes[index]
        if step.dtype == "int64":
            source, axis = step.class_count_of
            classes = program.shapes[source][axis]
            lines.append(f"    {names[index]} = torch.randint(0, {classes}, ({', '.join(map(str, shape))},))")
        else:
            sizes = ", ".join(map(str, shape)) if shape else "()"
            lines.append(f"    {names[index]} = torch.randn({sizes}{dtype_argument})")
    lines += [
        f"    return [{', '.join(names[i] for i in input_ids)}]",
        "",
        "",
        "def get_init_inputs():",
        "    return []",
        "",
    ]
    return "\n".join(lines)


def program_metadata(program: Program, registry: OperatorRegistry) -> dict:
    """The JSONL index record of a program (everything but its source)."""
    steps = program.dag.steps
    return {
        "hash": program.canonical_hash(),
        "level": program.level,
        "seed": program.seed,
        "ops": [step.operator for _, step in program.compute_steps],
        "families": [registry[step.operator].family for _, step in program.compute_steps],
        "input_shapes": [list(program.shapes[i]) for i, s in enumerate(steps) if isinstance(s, CreateOp)],
        "output_shapes": [list(program.shapes[i]) for i in program.dag.outputs()],
        "op_shapes": [list(program.shapes[i]) for i, _ in program.compute_steps],
        "attrs": [step.attrs for _, step in program.compute_steps],
        "edges": _data_flow_edges(program),
        "flops": program.flops,
        "bytes": program.bytes,
        "parameter_count": sum(
            math.prod(shape) for shapes in program.parameters.values() for shape in shapes.values()
        ),
    }


def _data_flow_edges(program: Program) -> list[list[int]]:
    """[producer op position, consumer op position] for every tensor passed between ops."""
    position = {index: number for number, (index, _) in enumerate(program.compute_steps)}
    return [
        [position[source], position[index]]
        for index, step in program.compute_steps
        for source in step.inputs
        if source in position
    ]
