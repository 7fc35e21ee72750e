"""Prompt and output formats of drtriton's models, versioned: what a model reads and writes, for training and serving.

Script writer (after Little Dragon): op graph (and, to refine, a script and its time) in, schedule script out.
Kernel writer (after DRTriton): a KernelBench-form program in, a complete `ModelNew` module out.

A prompt ends in a newline and every completion written here starts with a character that is not white space
(`kernel`, `keep`, a docstring), so a byte-level BPE tokenizer splits prompt + completion where the prompt ends:
the tokens a model was trained on after the prompt are the tokens it is asked to continue at inference.
A completion ends with the line `### end`; parsing reads up to it (or to the end of the text) and never
raises: a completion that does not parse comes back with the compiler's or Python's message, which is the
feedback a refinement turn gives the model. This module imports no torch (the compiler is imported
only to check a script), so the language server can import it.
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass
from typing import Any

from drtriton_lsp.compiler.graph import OpGraph, TensorSpec

# Bump on any change to the text a model reads or writes: a model is served with the version it was trained on.
FORMAT_VERSION = 1
END_LINE = "### end"
SCRIPT_WRITER_HEADER = f"### drtriton script writer, format {FORMAT_VERSION}"
KERNEL_WRITER_HEADER = f"### drtriton kernel writer, format {FORMAT_VERSION}"
# Shape symbols as torch.export names them (s0, s77, u3); prompts renumber them d0, d1, ... by first use.
EXPORT_SYMBOL = re.compile(r"\b[a-z]+[0-9]+\b")
CODE_FENCE = re.compile(r"^```[A-Za-z0-9_+-]*$")


@dataclass(frozen=True)
class ScriptAnswer:
    """A script writer's completion, read: the canonical script when it is valid, else why not.

    script: the script text (`print_schedule` spelling), None when the completion does not parse.
    error: "" when valid; otherwise the parser's or the compiler's message (feedback for the model).
    """

    script: str | None
    error: str = ""

    @property
    def valid(self) -> bool:
        return self.script is not None and not self.error


@dataclass(frozen=True)
class KernelAnswer:
    """A kernel writer's completion, read: the module source when it is Python defining `ModelNew`, else why not."""

    source: str | None
    error: str = ""

    @property
    def valid(self) -> bool:
        return self.source is not None and not self.error


def render_graph(graph: OpGraph) -> str:
    """The op graph as lines: inputs (dtype, shape, kind), free sizes with their example values, one line per op
    (its graph name, which scripts use, the ATen call and its result), and the outputs.

    Strides are not shown: the graph records none, and generated kernels take them at run time."""
    symbols = _symbol_names(graph)
    lines = []
    for graph_input in graph.inputs:
        kind = graph_input.kind + (f" {graph_input.target}" if graph_input.target != graph_input.name else "")
        spec = _spec_text(graph_input.spec, symbols) if graph_input.spec else "scalar"
        lines.append(f"input {graph_input.name}: {spec} {kind}")
    for symbol, renamed in symbols.items():
        low, high = graph.symbol_ranges.get(symbol, [None, None])
        hint = graph.symbol_hints.get(symbol)
        bounds = f" range {low}..{'' if high is None else high}" if low is not None else ""
        lines.append(f"size {renamed}" + (f" = {hint}" if hint is not None else "") + bounds)
    for node in graph.nodes:
        arguments = [_value_text(value, symbols) for value in node.args]
        arguments += [f"{key}={_value_text(value, symbols)}" for key, value in node.kwargs.items()]
        results = ", ".join(_spec_text(spec, symbols) for spec in node.outputs)
        lines.append(f"op {node.name} = {node.op}({', '.join(arguments)}) -> {results}")
    lines.append("output " + ", ".join(_value_text(value, symbols) for value in graph.outputs))
    return "\n".join(lines) + "\n"


def script_prompt(graph: OpGraph) -> str:
    """The script writer's task: write the schedule script for `graph`."""
    return f"{SCRIPT_WRITER_HEADER}\n### graph\n{render_graph(graph)}### script\n"


def refine_prompt(graph: OpGraph, script: str, *, measured_ms: float | None = None, feedback: str = "") -> str:
    """The script writer's refinement task: a faster (or, after `feedback`, a valid) script than `script`.

    measured_ms: the current script's measured time; feedback: why the current script was rejected."""
    current = script if script.endswith("\n") or not script else script + "\n"
    return (
        f"{SCRIPT_WRITER_HEADER}\n### graph\n{render_graph(graph)}### current script, "
        f"{_verdict(measured_ms, feedback)}\n{current}"
        "### faster script\n"
    )


def script_completion(script: str) -> str:
    """What a script writer is trained to write for `script`: its steps, then the end line. A `replay` line is left
    out: whether the forward replays as a CUDA graph is the product's choice (planner.with_default_replay), not the
    writer's, so its grammar has no such line."""
    from drtriton_lsp.compiler.script import REPLAY_LINE

    steps = [line for line in script.strip().splitlines() if line != REPLAY_LINE]
    return "".join(line + "\n" for line in steps) + END_LINE + "\n"


def kernel_prompt(program_source: str) -> str:
    """The kernel writer's task: a `ModelNew` module with Triton kernels for a KernelBench-form program."""
    program = program_source if program_source.endswith("\n") else program_source + "\n"
    return f"{KERNEL_WRITER_HEADER}\n### program\n{program}### ModelNew\n"


def kernel_refine_prompt(
    program_source: str, module_source: str, *, measured_ms: float | None = None, feedback: str = ""
) -> str:
    """The kernel writer's refinement task: a faster (or, after `feedback`, a correct) module than `module_source`.

    measured_ms: the current module's measured time; feedback: why the verifier (or the parser) rejected it."""
    program = program_source if program_source.endswith("\n") else program_source + "\n"
    current = module_source if module_source.endswith("\n") or not module_source else module_source + "\n"
    return (
        f"{KERNEL_WRITER_HEADER}\n### program\n{program}### current ModelNew, {_verdict(measured_ms, feedback)}\n"
        f"{current}### faster ModelNew\n"
    )


def kernel_completion(module_source: str) -> str:
    """What a kernel writer is trained to write: the complete module, then the end line."""
    body = module_source.lstrip()
    return (body if body.endswith("\n") else body + "\n") + END_LINE + "\n"


def parse_script_answer(completion: str, graph: OpGraph | None = None) -> ScriptAnswer:
    """Read a script writer's completion; with `graph`, also check that the compiler can decode it for that graph.

    Never raises for any text: an answer that is not a valid script carries the message that says why."""
    from drtriton_lsp.compiler.errors import ScheduleError
    from drtriton_lsp.compiler.script import parse_schedule, print_schedule

    text = _answer_text(completion)
    if not text.strip():
        return ScriptAnswer(None, "the answer is empty: write one 'kernel' or 'keep' line per op, then '### end'")
    try:
        script = print_schedule(parse_schedule(text))
    except ScheduleError as error:
        return ScriptAnswer(None, _message(error))
    if graph is not None:
        problem = script_problem(graph, script)
        if problem:
            return ScriptAnswer(script, problem)
    return ScriptAnswer(script)


def script_problem(graph: OpGraph, script: str) -> str:
    """Why the compiler cannot decode `script` for `graph` ("" when it can): the compiler's own message."""
    from drtriton_lsp.compiler.codegen import compile_graph
    from drtriton_lsp.errors import DrtritonError

    forward_params = [graph_input.target for graph_input in graph.inputs if graph_input.kind == "user_input"]
    try:
        compile_graph(graph, prefix="model", forward_params=forward_params, has_self=True, schedule=script)
    except DrtritonError as error:
        return _message(error)
    except Exception as error:  # noqa: BLE001 - a compiler bug met through model output: feedback, and visible
        return f"the compiler failed on this script ({type(error).__name__}: {error}); report it as a drtriton bug"
    return ""


def extract_kernel_answer(completion: str) -> KernelAnswer:
    """Read a kernel writer's completion: Python source that defines `class ModelNew` at the top level.

    Never raises for any text. Whether the module is correct (and uses Triton honestly) is the verifier's call."""
    text = _answer_text(completion)
    if not text.strip():
        return KernelAnswer(None, "the answer is empty: write a complete Python module defining class ModelNew")
    try:
        tree = ast.parse(text)
    except SyntaxError as error:
        return KernelAnswer(None, f"the module does not parse: line {error.lineno}: {error.msg}")
    except (ValueError, RecursionError, MemoryError) as error:
        return KernelAnswer(None, f"the module does not parse: {type(error).__name__}: {error}")
    if not any(isinstance(node, ast.ClassDef) and node.name == "ModelNew" for node in tree.body):
        return KernelAnswer(None, "the module defines no top-level class ModelNew")
    return KernelAnswer(text if text.endswith("\n") else text + "\n")


def _verdict(measured_ms: float | None, feedback: str) -> str:
    """What a refinement prompt says of the current answer: rejected (why), its measured time, or not measured."""
    if feedback:
        return "rejected: " + " ".join(feedback.split())
    if measured_ms is not None and math.isfinite(measured_ms):
        return f"measured {measured_ms:.4g} ms"
    return "not measured"


def _answer_text(completion: str) -> str:
    """The completion up to its end line, without a Markdown code fence around it (instruction-tuned models add one)."""
    lines = completion.split("\n")
    for number, line in enumerate(lines):
        if line.rstrip() == END_LINE:
            lines = lines[:number] + [""]
            break
    while lines and not lines[0].strip():
        lines.pop(0)
    if lines and CODE_FENCE.match(lines[0].strip()):
        lines.pop(0)
        closing = [number for number, line in enumerate(lines) if line.strip() == "```"]
        if closing:
            lines = lines[: closing[0]] + [""]
    return "\n".join(lines)


def _message(error: Any) -> str:
    hint = getattr(error, "hint", "")
    return f"{error.message} ({hint})" if hint else error.message


def _symbol_names(graph: OpGraph) -> dict[str, str]:
    """Export's shape symbols, renamed d0, d1, ... in order of first use, so that prompts do not depend on
    how export happened to number them."""
    names: dict[str, str] = {}
    specs: list[TensorSpec] = [g.spec for g in graph.inputs if g.spec] + [s for n in graph.nodes for s in n.outputs]
    for spec in specs:
        for size in spec.shape:
            if isinstance(size, str):
                for symbol in EXPORT_SYMBOL.findall(size):
                    names.setdefault(symbol, f"d{len(names)}")
    for symbol in [*graph.symbol_ranges, *graph.symbol_hints]:
        if EXPORT_SYMBOL.fullmatch(symbol):
            names.setdefault(symbol, f"d{len(names)}")
    return names


def _spec_text(spec: TensorSpec | None, symbols: dict[str, str]) -> str:
    if spec is None:
        return "?"
    sizes = [str(size) if isinstance(size, int) else _renamed(size, symbols) for size in spec.shape]
    return f"{spec.dtype}[{', '.join(sizes)}]"


def _renamed(expression: str, symbols: dict[str, str]) -> str:
    return EXPORT_SYMBOL.sub(lambda match: symbols.get(match.group(0), match.group(0)), expression)


def _value_text(value: Any, symbols: dict[str, str]) -> str:
    """An encoded op argument (see `OpNode`) as Python-like text."""
    if isinstance(value, dict):
        if "ref" in value:
            return str(value["ref"])
        if "list" in value:
            return "[" + ", ".join(_value_text(item, symbols) for item in value["list"]) + "]"
        if "dtype" in value:
            return f"torch.{value['dtype']}"
        for key in ("device", "layout", "memory_format"):
            if key in value:
                return f"{key}({value[key]})"
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_value_text(item, symbols) for item in value) + "]"
    if isinstance(value, str):
        # a symbolic size (an expression over export's symbols) reads as maths; any other string as a literal
        found = EXPORT_SYMBOL.findall(value)
        return _renamed(value, symbols) if found and all(symbol in symbols for symbol in found) else repr(value)
    return repr(value)
