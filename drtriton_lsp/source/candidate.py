"""Assembling a candidate: a Task's module with `class ModelNew` whose forward runs generated Triton code.

The verifier compares ModelNew with the task's Model: same constructor, and no reference to Model itself.
"""

from __future__ import annotations

import ast
from typing import Protocol

from drtriton_lsp.errors import SourceError
from drtriton_lsp.source.pyfile import (
    Chunk,
    ParsedFile,
    TopLevelStatement,
    definition_start_line,
    import_bindings,
    is_docstring,
    join_chunks,
    missing_imports,
    parse_file,
)
from drtriton_lsp.source.targets import (
    EXAMPLE_INPUT_FUNCTIONS,
    forwarding_arguments,
    method_signature,
    parameters_without_first,
)


class GeneratedProgram(Protocol):
    """What the source layer reads from a compiled program (compiler.codegen.CompiledProgram)."""

    kernel_block: str
    forward_function: str
    required_imports: tuple[str, ...]
    replay: bool  # write-back's dispatch replays the forward as CUDA graphs


def build_candidate(task_source: str, program: GeneratedProgram, header: str) -> str:
    """The candidate module: `header` as its docstring, the task's imports (plus what the program
    needs) and helpers, the program's kernel block, and ModelNew, whose forward calls
    `program.forward_function(self, ...)` with Model.forward's parameters."""
    parsed = parse_file(task_source)
    model = _model_class(parsed)
    forward = _forward_method(model)
    kept = [
        statement
        for index, statement in enumerate(parsed.statements)
        if not (index == 0 and is_docstring(statement.nodes[0]))
        and model not in statement.nodes
        and not any(
            statement.defines(name, (ast.FunctionDef, ast.AsyncFunctionDef))
            for name in EXAMPLE_INPUT_FUNCTIONS
        )
    ]
    leading_imports = 0
    while leading_imports < len(kept) and kept[leading_imports].is_import:
        leading_imports += 1
    bound = import_bindings([node for statement in kept for node in statement.nodes])
    added_imports = missing_imports([*program.required_imports, "import torch"], bound)

    chunks = [Chunk.generated(_docstring(header), kind="statement")]
    chunks += [_copied(parsed, statement) for statement in kept[:leading_imports]]
    chunks += [Chunk.generated(line, kind="import") for line in added_imports]
    chunks += [_copied(parsed, statement) for statement in kept[leading_imports:]]
    chunks.append(Chunk.generated(program.kernel_block))
    chunks.append(Chunk.generated(_model_new(parsed, model, forward, program.forward_function)))
    text, _ = join_chunks(chunks)
    return text


def _model_class(parsed: ParsedFile) -> ast.ClassDef:
    classes = [node for node in parsed.tree.body if isinstance(node, ast.ClassDef) and node.name == "Model"]
    if not classes:
        raise SourceError(
            "The task defines no `class Model`.",
            "A task must be in KernelBench form: class Model(nn.Module), get_inputs(), get_init_inputs().",
        )
    return classes[-1]


def _forward_method(model: ast.ClassDef) -> ast.FunctionDef | ast.AsyncFunctionDef:
    methods = [
        node
        for node in model.body
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == "forward"
    ]
    if not methods:
        raise SourceError(
            "The task's Model defines no forward method.",
            "Define Model.forward in the task; drtriton replaces exactly that method.",
            line=model.lineno,
        )
    return methods[-1]


def _docstring(header: str) -> str:
    escaped = header.strip("\n").replace("\\", "\\\\").replace('"""', '\\"\\"\\"')
    if escaped.endswith('"'):
        escaped = escaped[:-1] + '\\"'
    return f'"""{escaped}\n"""' if "\n" in escaped else f'"""{escaped}"""'


def _copied(parsed: ParsedFile, statement: TopLevelStatement) -> Chunk:
    lines = list(
        enumerate(parsed.lines[statement.start_line - 1 : statement.end_line], start=statement.start_line)
    )
    return Chunk.copied(lines, statement)


def _model_new(
    parsed: ParsedFile,
    model: ast.ClassDef,
    forward: ast.FunctionDef | ast.AsyncFunctionDef,
    forward_function: str,
) -> str:
    """ModelNew: Model's members except its docstring and forward, copied with `super(Model,
    self)` made `super()` and any other `Model` made `ModelNew`; then a forward that calls the
    generated code."""
    members = [node for node in model.body if node is not forward and not is_docstring(node)]
    indent = _indentation(parsed, model.body[0])
    parameters = parameters_without_first(forward.args)
    lines = [
        f"class ModelNew({_bases(parsed, model)}):",
        f'{indent}"""Model with its forward computed by `{forward_function}` (generated Triton kernels)."""',
    ]
    for member in members:
        lines.append("")
        lines += _member_without_model(parsed, member)
    lines += [
        "",
        f"{indent}def forward({method_signature(parameters)}):",
        f"{indent}{indent}return {forward_function}({_forwarded_call(parameters)})",
    ]
    return "\n".join(lines)


def _forwarded_call(parameters: ast.arguments) -> str:
    """`self, x, y`: the arguments ModelNew.forward passes on to the generated forward function."""
    passed = forwarding_arguments(parameters)
    return f"self, {passed}" if passed else "self"


def _indentation(parsed: ParsedFile, node: ast.stmt) -> str:
    text = parsed.line_text(node.lineno)
    return text[: len(text) - len(text.lstrip())] or "    "


def _bases(parsed: ParsedFile, model: ast.ClassDef) -> str:
    """`torch.nn.Module` for a plain module; otherwise Model's own bases, so inherited helpers stay."""
    if not model.keywords and all(
        parsed.resolve_dotted(base) in ("torch.nn.Module", "torch.nn.modules.module.Module")
        for base in model.bases
    ):
        return "torch.nn.Module"
    return ", ".join(
        ast.get_source_segment(parsed.source, node) or "" for node in (*model.bases, *model.keywords)
    )


def _member_without_model(parsed: ParsedFile, member: ast.stmt) -> list[str]:
    """A class member's lines, `super(Model, self)` made `super()` and other `Model` names `ModelNew`."""
    start_line = definition_start_line(member, parsed.lines)
    edits: dict[int, list[tuple[int, int, str]]] = {}
    for inner in ast.walk(member):
        if _is_super_of_model(inner) and inner.lineno == inner.end_lineno:
            start = parsed.char_column(inner.lineno, inner.col_offset)
            end = parsed.char_column(inner.lineno, inner.end_col_offset or 0)
            edits.setdefault(inner.lineno, []).append((start, end, "super()"))
    for inner in ast.walk(member):
        if isinstance(inner, ast.Name) and inner.id == "Model":
            start = parsed.char_column(inner.lineno, inner.col_offset)
            if not any(begin <= start < end for begin, end, _ in edits.get(inner.lineno, ())):
                edits.setdefault(inner.lineno, []).append((start, start + len("Model"), "ModelNew"))
    lines = []
    for number in range(start_line, (member.end_lineno or member.lineno) + 1):
        text = parsed.line_text(number)
        for start, end, replacement in sorted(edits.get(number, ()), reverse=True):
            text = text[:start] + replacement + text[end:]
        lines.append(text)
    return lines


def _is_super_of_model(node: ast.AST) -> bool:
    """`super(Model, self)`."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "super"
        and len(node.args) == 2
        and isinstance(node.args[0], ast.Name)
        and node.args[0].id == "Model"
    )
