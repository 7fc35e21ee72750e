"""Extracting a Task: one target and everything it needs, copied out of a user's file in KernelBench form.

Example inputs come, in order, from an input pragma on the target, from get_inputs() and
get_init_inputs() in the file, or nowhere (a SourceError whose hint shows the pragma to add).

Input pragma: comment lines directly above the target's first line (above its decorators),
each `# drtriton: <key> = <Python expression>`:

    # drtriton: inputs = [torch.randn(64, 1024)]
    # drtriton: init = [1024, 4096]
    class MLPBlock(nn.Module):

`inputs` is the list of forward arguments and `init` the list of constructor arguments; `init`
may be left out when the constructor needs none. Both are evaluated later, in the task's
namespace (in a worker), so they may use the file's imports and module constants: whatever
they name is copied into the task. Other comments may share the block; a blank line ends it.

get_inputs()/get_init_inputs() in the file apply to the class named Model if there is one,
else to the only nn.Module target, else to the only target.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

from drtriton_lsp.errors import SourceError
from drtriton_lsp.source.pyfile import (
    BLOCK_END,
    BLOCK_START,
    BUILTIN_NAMES,
    Chunk,
    ParsedFile,
    TopLevelStatement,
    dispatch_decorator_lines,
    global_names_used,
    import_bindings,
    join_chunks,
    parse_file,
)
from drtriton_lsp.source.targets import (
    EXAMPLE_INPUT_FUNCTIONS,
    LocatedTarget,
    Target,
    find_located_target,
    forwarding_arguments,
    locate_targets,
    method_signature,
    required_parameters,
)
from drtriton_lsp.task import LineMapping, Task

PRAGMA_KEYS = ("inputs", "init")
# `<hidden>`: a value the quick fix could not find in the file, left for the user to fill in
PRAGMA_PLACEHOLDER = re.compile(r"<(\w+)>")
_PRAGMA = re.compile(r"^\s*#\s*drtriton:\s*(\w+)\s*=(.*)$")


@dataclass(frozen=True)
class TargetInputs:
    """Whether a target has example inputs: `inputs_from` is "pragma" or "get_inputs", or None
    with `problem` saying what is missing or malformed."""

    target: Target
    inputs_from: str | None
    problem: SourceError | None

    @property
    def available(self) -> bool:
        return self.inputs_from is not None


def targets_with_inputs(source: str, path: str | None = None) -> list[TargetInputs]:
    """Every target and whether extract_task would find example inputs for it.

    Raises SourceError only for a file that does not parse.
    """
    parsed = parse_file(source, path)
    located = locate_targets(parsed)
    results = []
    for candidate in located:
        try:
            inputs = _resolve_inputs(parsed, candidate, located)
        except SourceError as problem:
            results.append(TargetInputs(candidate.target, None, problem))
        else:
            results.append(TargetInputs(candidate.target, inputs.inputs_from, None))
    return results


def extract_task(source: str, target_name: str, path: str | None = None) -> Task:
    """The target `target_name` as a self-contained KernelBench-form module.

    Copies, verbatim and in file order, the statements the target needs (transitively): imports,
    constants, helpers, plus example-input functions. A module target is renamed `Model`; a
    function target is wrapped in a generated `Model`.
    """
    parsed = parse_file(source, path)
    located, all_located = find_located_target(parsed, target_name)
    inputs = _resolve_inputs(parsed, located, all_located)
    target = located.target
    target_statement = _statement_defining(parsed, located.definition)

    copied_lines = {
        index: _without_dispatch_decorators(parsed, statement, _numbered_lines(parsed, statement))
        for index, statement in enumerate(parsed.statements)
    }
    target_index = parsed.statements.index(target_statement)

    generated = list(inputs.chunks)
    if target.kind == "function":
        generated.insert(0, _function_model(located))
    seeds = {target_index} | {parsed.statements.index(statement) for statement in inputs.statements}
    needed = _needed_statements(parsed, copied_lines, seeds, generated, target.name)
    _check_standalone(parsed, target, needed)
    _check_name_clashes(parsed, target, needed, target_index, inputs)

    if target.kind == "module" and target.name != "Model":
        for index in needed:
            copied_lines[index] = _renamed(parsed, index, copied_lines[index], target, "Model")

    futures = [index for index in sorted(needed) if parsed.statements[index].is_future_import]
    others = [index for index in sorted(needed) if index not in futures]
    chunks = [Chunk.copied(copied_lines[index], parsed.statements[index]) for index in futures]
    bound = import_bindings([node for index in needed for node in parsed.statements[index].nodes])
    if bound.get("torch") != "torch":
        chunks.append(Chunk.generated("import torch", kind="import"))
    chunks += [Chunk.copied(copied_lines[index], parsed.statements[index]) for index in others]
    chunks += generated
    text, origins = join_chunks(chunks)
    return Task(
        name=target.name,
        kind=target.kind,
        source=text,
        origin_path=path,
        line_map=_line_mappings(origins),
        inputs_from=inputs.inputs_from,
    )


def example_input_expressions(source: str, target_name: str, path: str | None = None) -> tuple[str, str]:
    """(inputs, init): Python expressions, evaluated in the user's module, giving the target's example forward
    arguments and constructor arguments, where extract_task finds them (pragma or get_inputs/get_init_inputs)."""
    parsed = parse_file(source, path)
    located, all_located = find_located_target(parsed, target_name)
    inputs = _resolve_inputs(parsed, located, all_located)
    if inputs.inputs_from == "pragma":
        pragmas = _read_pragmas(parsed, located.target)
        return pragmas["inputs"][0], pragmas["init"][0] if "init" in pragmas else "[]"
    has_init = any(statement.defines("get_init_inputs", ast.FunctionDef) for statement in inputs.statements)
    return "get_inputs()", "get_init_inputs()" if has_init else "[]"


@dataclass(frozen=True)
class _ExampleInputs:
    """Where a target's example inputs come from: file functions to copy and generated ones."""

    inputs_from: str
    statements: tuple[TopLevelStatement, ...]
    chunks: tuple[Chunk, ...]


def _resolve_inputs(
    parsed: ParsedFile, located: LocatedTarget, all_located: tuple[LocatedTarget, ...]
) -> _ExampleInputs:
    pragmas = _read_pragmas(parsed, located.target)
    if "inputs" in pragmas:
        chunks = [_input_function("get_inputs", *pragmas["inputs"])]
        if "init" in pragmas:
            chunks.append(_input_function("get_init_inputs", *pragmas["init"]))
        else:
            chunks.append(
                _empty_init_inputs(
                    parsed, located, "a `# drtriton: init = [...]` line under the inputs pragma"
                )
            )
        return _ExampleInputs("pragma", (), tuple(chunks))
    if "init" in pragmas:
        _, line = pragmas["init"]
        raise SourceError(
            f"{located.target.name} has a drtriton init pragma but no inputs pragma.",
            f"Add `# drtriton: inputs = [...]` next to the init pragma on line {line}, "
            "listing the forward arguments.",
            path=parsed.path,
            line=line,
        )
    file_functions = _example_input_functions(parsed)
    if "get_inputs" in file_functions and _file_inputs_owner(all_located) == located.target.name:
        if "get_init_inputs" in file_functions:
            return _ExampleInputs(
                "get_inputs", (file_functions["get_inputs"], file_functions["get_init_inputs"]), ()
            )
        chunk = _empty_init_inputs(parsed, located, "get_init_inputs() returning them")
        return _ExampleInputs("get_inputs", (file_functions["get_inputs"],), (chunk,))
    raise _missing_inputs_error(parsed, located, all_located, "get_inputs" in file_functions)


def _read_pragmas(parsed: ParsedFile, target: Target) -> dict[str, tuple[str, int]]:
    """The pragma comments above the target: key -> (expression text, line)."""
    pragmas: dict[str, tuple[str, int]] = {}
    line = target.span.start_line - 1
    while line >= 1:
        text = parsed.line_text(line)
        stripped = text.lstrip()
        if not stripped.startswith("#") or stripped.startswith((BLOCK_START, BLOCK_END)):
            break
        match = _PRAGMA.match(text)
        if match:
            key, expression = match.group(1), match.group(2).strip()
            _check_pragma(parsed, key, expression, line, pragmas)
            pragmas[key] = (expression, line)
        line -= 1
    return pragmas


def _check_pragma(
    parsed: ParsedFile, key: str, expression: str, line: int, seen: dict[str, tuple[str, int]]
) -> None:
    example = "`# drtriton: inputs = [torch.randn(64, 1024)]` or `# drtriton: init = [1024, 4096]`"
    if key not in PRAGMA_KEYS:
        raise SourceError(
            f"Unknown drtriton pragma `{key}` on line {line}.",
            f"The pragma keys are `inputs` and `init`, e.g. {example}.",
            path=parsed.path,
            line=line,
        )
    if key in seen:
        raise SourceError(
            f"The drtriton {key} pragma appears twice (lines {line} and {seen[key][1]}).",
            "Keep one of them.",
            path=parsed.path,
            line=line,
        )
    placeholders = PRAGMA_PLACEHOLDER.findall(expression)
    if placeholders:
        names = ", ".join(f"`{name}`" for name in placeholders)
        raise SourceError(
            f"The drtriton {key} pragma on line {line} still holds placeholders for {names}.",
            f"Put in the place of each <name> the value you use (a number, a shape, or a constant the file defines), "
            f"e.g. {example}.",
            path=parsed.path,
            line=line,
        )
    try:
        ast.parse(expression, mode="eval")
    except SyntaxError as error:
        raise SourceError(
            f"The drtriton {key} pragma on line {line} is not a Python expression "
            f"({error.msg}): {expression!r}",
            f"Write a list after `=` on one line, e.g. {example}.",
            path=parsed.path,
            line=line,
        ) from None


def _input_function(name: str, expression: str, line: int) -> Chunk:
    """`def name(): return <expression>`, its return line mapped to the pragma's line."""
    chunk = Chunk.generated(f"def {name}():\n    return {expression}")
    return Chunk(chunk.lines, (None, line), "definition")


def _empty_init_inputs(parsed: ParsedFile, located: LocatedTarget, what_to_add: str) -> Chunk:
    """get_init_inputs() returning [] for a constructor without required arguments; else an error."""
    required = located.init_required_params
    if required == ():
        return Chunk.generated("def get_init_inputs():\n    return []")
    name = located.target.name
    if required is None:
        needs = (
            f"{name} inherits its constructor from outside the file, so drtriton cannot tell its arguments"
        )
        example = "[...]"
    else:
        needs = f"{name}'s constructor needs {', '.join(required)}"
        example = f"[{', '.join(required)}]"
    raise SourceError(
        f"{needs}, and there are no example constructor arguments.",
        f"Add {what_to_add}, e.g. `# drtriton: init = {example}` with real values "
        f"(`init = []` if it needs none).",
        path=parsed.path,
        line=located.target.span.start_line,
    )


@functools.lru_cache(maxsize=4)
def _example_input_functions(parsed: ParsedFile) -> dict[str, TopLevelStatement]:
    """get_inputs/get_init_inputs defined in the file (cached with the parse: asked once per target)."""
    functions = {}
    for statement in parsed.statements:
        for name in EXAMPLE_INPUT_FUNCTIONS:
            if not statement.in_generated_block and statement.defines(
                name, (ast.FunctionDef, ast.AsyncFunctionDef)
            ):
                functions[name] = statement
    return functions


def _file_inputs_owner(all_located: tuple[LocatedTarget, ...]) -> str | None:
    """The target get_inputs() in the file describes: Model, else the only module, else the only target."""
    names = [located.target.name for located in all_located]
    if "Model" in names:
        return "Model"
    modules = [located.target.name for located in all_located if located.target.kind == "module"]
    if len(modules) == 1:
        return modules[0]
    if len(names) == 1:
        return names[0]
    return None


def _missing_inputs_error(
    parsed: ParsedFile,
    located: LocatedTarget,
    all_located: tuple[LocatedTarget, ...],
    file_has_get_inputs: bool,
) -> SourceError:
    target = located.target
    keyword = "class" if target.kind == "module" else "def"
    line = target.span.start_line
    place = f"`{keyword} {target.name}` (line {line})"
    if line != located.definition.lineno:
        place = f"the decorators of `{keyword} {target.name}` (line {line})"
    forward_arguments = required_parameters(located.forward.args)[1 if target.kind == "module" else 0 :]
    pragma_lines = [
        f"    # drtriton: inputs = [{', '.join('torch.randn(8, 64)' for _ in forward_arguments)}]"
    ]
    what = "shapes"
    if located.init_required_params is None or located.init_required_params:
        values = [
            _value_in_file(parsed, target.name, position, name) or f"<{name}>"
            for position, name in enumerate(located.init_required_params or ["arguments"])
        ]
        pragma_lines.append(f"    # drtriton: init = [{', '.join(values)}]")
        what = "shapes and values"
    hint = (
        f"Add this directly above {place}, with the {what} you use:\n"
        + "\n".join(pragma_lines)
        + "\nor define get_inputs() and get_init_inputs() in the file, returning those lists."
    )
    owner = _file_inputs_owner(all_located)
    if file_has_get_inputs and owner:
        hint += f"\n(get_inputs() in this file belongs to {owner}.)"
    elif file_has_get_inputs:
        hint += "\n(get_inputs() in this file applies only to a class named Model, or to the only nn.Module.)"
    return SourceError(f"{target.name} has no example inputs.", hint, path=parsed.path, line=line)


def _value_in_file(parsed: ParsedFile, class_name: str, position: int, parameter: str) -> str | None:
    """A value for the constructor's `parameter` that the file itself gives: the argument of a call
    `ClassName(...)` in the file, or a module constant named like the parameter (`hidden` or `HIDDEN`); None if none.
    Only literals and module constants, so the pragma runs as the file would."""
    constants = {
        statement.targets[0].id: statement.value
        for statement in parsed.tree.body
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name)
        and _is_literal(statement.value)
    }

    def usable(expression: ast.expr) -> str | None:
        if _is_literal(expression) or (isinstance(expression, ast.Name) and expression.id in constants):
            return ast.unparse(expression)
        return None

    for node in ast.walk(parsed.tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == class_name:
            given = next((keyword.value for keyword in node.keywords if keyword.arg == parameter), None)
            if given is None and position < len(node.args) and not any(isinstance(a, ast.Starred) for a in node.args):
                given = node.args[position]
            if given is not None and usable(given) is not None:
                return usable(given)
    for name in (parameter, parameter.upper()):
        if name in constants:
            return name
    return None


def _is_literal(expression: ast.expr) -> bool:
    try:
        ast.literal_eval(expression)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def _statement_defining(parsed: ParsedFile, node: ast.stmt) -> TopLevelStatement:
    return next(statement for statement in parsed.statements if node in statement.nodes)


def _numbered_lines(parsed: ParsedFile, statement: TopLevelStatement) -> list[tuple[int, str]]:
    return list(
        enumerate(parsed.lines[statement.start_line - 1 : statement.end_line], start=statement.start_line)
    )


def _without_dispatch_decorators(
    parsed: ParsedFile, statement: TopLevelStatement, numbered: list[tuple[int, str]]
) -> list[tuple[int, str]]:
    """A statement's lines without the `@drtriton_dispatch(...)` lines earlier write-backs added (to the target,
    or to another target it uses, whose block the task does not copy): the task is the user's PyTorch code."""
    functions = []
    for node in statement.nodes:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append(node)
        elif isinstance(node, ast.ClassDef):
            functions += [member for member in node.body if isinstance(member, (ast.FunctionDef, ast.AsyncFunctionDef))]
    dropped = {line for function in functions for line in dispatch_decorator_lines(parsed, function)}
    if not dropped:
        return numbered
    return [(number, text) for number, text in numbered if number not in dropped]


def _function_model(located: LocatedTarget) -> Chunk:
    name = located.target.name
    arguments = located.definition.args
    return Chunk.generated(
        "class Model(torch.nn.Module):\n"
        f'    """The function `{name}` as a module, so it is verified and benchmarked like one."""\n'
        "\n"
        f"    def forward({method_signature(arguments)}):\n"
        f"        return {name}({forwarding_arguments(arguments)})"
    )


def _needed_statements(
    parsed: ParsedFile,
    copied_lines: dict[int, list[tuple[int, str]]],
    seeds: set[int],
    generated: list[Chunk],
    target_name: str,
) -> set[int]:
    """The statements the seeds and generated code need, transitively, in terms of module-level
    names: the statements binding each name read, and those assigning into a needed
    user-defined name (`REGISTRY["gelu"] = gelu`). `__future__` imports always come along."""
    binders: dict[str, list[int]] = {}
    mutators: dict[str, list[int]] = {}
    star_imports: list[int] = []
    needed: set[int] = set()
    for index, statement in enumerate(parsed.statements):
        if statement.in_generated_block or statement.is_main_guard:
            continue
        if statement.is_future_import:
            needed.add(index)
            continue
        if statement.is_star_import:
            star_imports.append(index)
        for name in statement.binds:
            binders.setdefault(name, []).append(index)
        for name in statement.mutates:
            mutators.setdefault(name, []).append(index)

    names = {target_name}.union(*(global_names_used("".join(chunk.lines)) for chunk in generated))
    resolved: set[str] = set()
    to_add = set(seeds)
    while to_add:
        for index in to_add - needed:
            needed.add(index)
            names |= _names_read(parsed, index, copied_lines[index])
        to_add = set()
        for name in names - resolved:
            if name in binders:
                to_add.update(binders[name])
                if any(not parsed.statements[index].is_import for index in binders[name]):
                    to_add.update(mutators.get(name, ()))
            elif name not in BUILTIN_NAMES:
                to_add.update(star_imports)
        resolved |= names
    return needed


def _names_read(parsed: ParsedFile, index: int, numbered: list[tuple[int, str]]) -> set[str]:
    text = "".join(line.rstrip("\r\n") + "\n" for _, line in numbered)
    try:
        return global_names_used(text)
    except SyntaxError as error:
        line = numbered[min(error.lineno or 1, len(numbered)) - 1][0]
        raise SourceError(
            f"Python rejects the code at line {line}: {error.msg}",
            "Fix it so the file runs, then run again.",
            path=parsed.path,
            line=line,
        ) from None


def _check_standalone(parsed: ParsedFile, target: Target, needed: set[int]) -> None:
    for index in sorted(needed):
        for node in parsed.statements[index].nodes:
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and inner.level > 0:
                    statement = parsed.line_text(inner.lineno).strip()
                    raise SourceError(
                        f"{target.name} needs `{statement}` (line {inner.lineno}), a relative import, "
                        "but drtriton runs the target as a standalone module, "
                        "where relative imports cannot resolve.",
                        "Use an absolute import that works when the file runs on its own "
                        f"(`from yourpackage.{inner.module or 'module'} import ...`), "
                        f"or move what {target.name} needs into this file.",
                        path=parsed.path,
                        line=inner.lineno,
                    )


def _check_name_clashes(
    parsed: ParsedFile, target: Target, needed: set[int], target_index: int, inputs: _ExampleInputs
) -> None:
    """The task defines Model (and maybe get_inputs/get_init_inputs); copied code must not."""
    generated_names = {"Model"} if target.name != "Model" else set()
    generated_names |= {"get_inputs", "get_init_inputs"} - {
        node.name
        for statement in inputs.statements
        for node in statement.nodes
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
    }
    copied_input_statements = {parsed.statements.index(statement) for statement in inputs.statements}
    for index in sorted(needed - {target_index} - copied_input_statements):
        clashes = parsed.statements[index].binds & generated_names
        if clashes:
            name = sorted(clashes)[0]
            line = parsed.statements[index].start_line
            raise SourceError(
                f"{target.name} needs the code at line {line}, which defines `{name}`; "
                f"the extracted task defines its own `{name}`.",
                f"Rename `{name}` at line {line} (drtriton names the extracted target Model "
                "and generates get_inputs/get_init_inputs).",
                path=parsed.path,
                line=line,
            )


def _renamed(
    parsed: ParsedFile, index: int, numbered: list[tuple[int, str]], target: Target, new: str
) -> list[tuple[int, str]]:
    """A statement's lines with the target's name, where it is defined and wherever a name refers
    to it (`super(MLPBlock, self)`), made `new`."""
    old = target.name
    columns: dict[int, list[int]] = {}
    if (
        parsed.statements[index].start_line
        <= target.name_span.start_line
        <= parsed.statements[index].end_line
    ):
        columns[target.name_span.start_line] = [target.name_span.start_column]
    for node in parsed.statements[index].nodes:
        for inner in ast.walk(node):
            if isinstance(inner, ast.Name) and inner.id == old:
                column = parsed.char_column(inner.lineno, inner.col_offset)
                columns.setdefault(inner.lineno, []).append(column)
    renamed = []
    for number, text in numbered:
        for column in sorted(columns.get(number, ()), reverse=True):
            text = text[:column] + new + text[column + len(old) :]
        renamed.append((number, text))
    return renamed


def _line_mappings(origins: list[int | None]) -> tuple[LineMapping, ...]:
    """Runs of consecutive task lines copied from consecutive user lines."""
    mappings: list[LineMapping] = []
    for task_line, origin in enumerate(origins, start=1):
        if origin is None:
            continue
        last = mappings[-1] if mappings else None
        if last and last.task_start + last.count == task_line and last.origin_start + last.count == origin:
            mappings[-1] = LineMapping(last.task_start, last.origin_start, last.count + 1)
        else:
            mappings.append(LineMapping(task_line, origin, 1))
    return tuple(mappings)
