"""Write-back: the edit that puts verified Triton kernels into the user's file, next to the code they replace.

A marked, self-contained block above the target plus one dispatch decorator, both libcst edits: every
other byte of the file (comments, formatting, CRLF line endings, a UTF-8 BOM) stays as it was.
"""

# NOTE: libcst is imported inside the functions that edit: the language server's analysis path and the
# verification worker import this package at start-up and must not pay for (or need) libcst.

from __future__ import annotations

import textwrap
from typing import TYPE_CHECKING, Any

from drtriton_lsp.errors import SourceError
from drtriton_lsp.source.applied import AppliedKernel
from drtriton_lsp.source.candidate import GeneratedProgram
from drtriton_lsp.source.dispatch import (
    DISPATCH_DECORATOR,
    describe_guard,
    render_dispatch_helper,
    render_specialization,
    specialization_name,
)
from drtriton_lsp.source.pyfile import (
    BLOCK_END,
    BLOCK_START,
    ParsedFile,
    block_markers,
    newline_of,
    parse_file,
)
from drtriton_lsp.source.targets import find_located_target

if TYPE_CHECKING:
    import libcst

BYTE_ORDER_MARK = "\ufeff"


def write_back(
    user_source: str,
    target_name: str,
    program: GeneratedProgram,
    provenance: str,
    guards: list[dict[str, Any]],
) -> str:
    """The user's file with `program` written in for the target `target_name`.

    provenance: plain text (any number of lines) written as comments at the top of the block.
    guards: what the kernels are specialised on (worker/specialization.py); the dispatch checks them.
    Writing again for the same target replaces its block and decorator. A leading byte order mark stays.
    """
    newline = newline_of(user_source.removeprefix(BYTE_ORDER_MARK))
    parsed = parse_file(user_source.removeprefix(BYTE_ORDER_MARK))
    is_method = find_located_target(parsed, target_name)[0].target.kind == "module"
    block_text = _block_text(target_name, provenance, program, guards, newline)
    call = _dispatch_call(program.forward_function, is_method, program.replay)
    return _with_block(user_source, target_name, block_text, call)


def remove_kernel(user_source: str, target_name: str) -> str:
    """The user's file without the block and the dispatch decorator written for `target_name`: Apply undone.
    Every other byte stays (comments, line endings, a byte order mark)."""
    import libcst

    bom = BYTE_ORDER_MARK if user_source.startswith(BYTE_ORDER_MARK) else ""
    source = user_source[len(bom):]
    parsed = parse_file(source)
    located, _ = find_located_target(parsed, target_name)
    _check_markers(parsed)
    module = _without_block(libcst.parse_module(source), target_name)
    index = _definition_index(module, target_name)
    definition = module.body[index]
    if located.target.kind == "module":
        definition = _with_decorated_forward(definition, None)
    else:
        definition = _with_decorator(definition, None)
    return bom + module.with_changes(body=[*module.body[:index], definition, *module.body[index + 1:]]).code


def applied_kernel_candidate(task_source: str, task_target: str, applied_source: str, applied: AppliedKernel) -> str:
    """The candidate that checks a kernel already in the user's file: the task with the file's block and dispatch
    decorator written in exactly as they stand, and `ModelNew = Model` (see `verification_candidate`).

    task_target: the target's name in the task ("Model" for a module target); applied: the file's block and line."""
    lines = applied_source.removeprefix(BYTE_ORDER_MARK).splitlines(keepends=True)
    newline = newline_of(task_source)
    block_text = "".join(lines[applied.block_start - 1 : applied.block_end]).replace("\r\n", "\n")
    block_text = (block_text + "\n\n").replace("\n", newline)
    decorator = lines[applied.decorator_line - 1].strip().removeprefix("@")
    written = _with_block(task_source, task_target, block_text, decorator)
    return written.rstrip("\n") + "\n\n\n# the verifier builds ModelNew: the written-back Model itself\nModelNew = Model\n"


def _with_block(user_source: str, target_name: str, block_text: str, decorator_call: str) -> str:
    """`user_source` with `block_text` above the target's definition (replacing an earlier block for it) and the
    dispatch decorator `@decorator_call` on its forward (or on the function)."""
    import libcst

    bom = BYTE_ORDER_MARK if user_source.startswith(BYTE_ORDER_MARK) else ""
    source = user_source[len(bom):]
    parsed = parse_file(source)
    located, _ = find_located_target(parsed, target_name)
    _check_markers(parsed)
    is_method = located.target.kind == "module"

    module = libcst.parse_module(source)
    module = _without_block(module, target_name)
    index = _definition_index(module, target_name)
    definition = module.body[index]
    decorator = libcst.Decorator(decorator=libcst.parse_expression(decorator_call))
    if is_method:
        definition = _with_decorated_forward(definition, decorator)
    else:
        definition = _with_decorator(definition, decorator)

    block = libcst.parse_module(block_text)
    lines = list(definition.leading_lines)
    header = list(module.header)
    if index == 0:
        lines, header = header + lines, []
    above, attached = _split_leading_lines(lines)
    statements = list(block.body)
    statements[0] = statements[0].with_changes(leading_lines=[*above, *block.header, *statements[0].leading_lines])
    definition = definition.with_changes(leading_lines=[*block.footer, *attached])
    body = [*module.body[:index], *statements, definition, *module.body[index + 1:]]
    return bom + module.with_changes(header=header, body=body).code


def verification_candidate(
    task_source: str, target_name: str, program: GeneratedProgram, header: str, guards: list[dict[str, Any]]
) -> str:
    """The candidate the verifier judges: the task module with its target written back exactly as the
    user's file will get it (same block, dispatch helper and decorator), and `ModelNew = Model` after it.

    target_name: "Model" for a module target (the task renames it), else the task's function, which the
    task's generated Model calls, so the verifier's calls go through the written dispatch.
    """
    written = write_back(task_source, target_name, program, header, guards)
    return written.rstrip("\n") + "\n\n\n# the verifier builds ModelNew: the written-back Model itself\nModelNew = Model\n"


def describe_specialization(guards: list[dict[str, Any]], owner: str) -> list[str]:
    """The guards in words, one line each (report, provenance comment)."""
    return [describe_guard(guard, owner) for guard in guards]


def _check_markers(parsed: ParsedFile) -> None:
    """Every block start marker needs its end marker (and the reverse), or blocks cannot be replaced."""
    open_blocks: dict[str, int] = {}
    for number, kind, name in block_markers(parsed.lines):
        if kind == ">>>":
            open_blocks[name] = number
        elif open_blocks.pop(name, None) is None:
            _raise_broken_block(parsed, name, number, "an end marker without its start marker")
    for name, number in open_blocks.items():
        _raise_broken_block(parsed, name, number, "a start marker without its end marker")


def _raise_broken_block(parsed: ParsedFile, name: str, line: int, problem: str) -> None:
    raise SourceError(
        f"The generated block for {name} has {problem} (line {line}).",
        f"Restore the marker lines `{BLOCK_START}{name}` and `{BLOCK_END}{name}` around the block, "
        f"or delete the whole block and the @{DISPATCH_DECORATOR} line, then run again.",
        path=parsed.path,
        line=line,
    )


def _is_marker(line: libcst.EmptyLine, marker: str) -> bool:
    return line.comment is not None and line.comment.value.rstrip() == marker


def _without_block(module: libcst.Module, name: str) -> libcst.Module:
    """The module without the block generated for `name` and the two blank lines after its end marker.

    The markers are comment lines, which libcst keeps in the leading lines of the statement after them
    (the module's header or footer at either end of the file).
    """
    start, end = f"{BLOCK_START}{name}", f"{BLOCK_END}{name}"
    # holder -1 is the header, 0..n-1 the statements' leading lines, n the footer
    holders = [list(module.header), *(list(statement.leading_lines) for statement in module.body), list(module.footer)]

    def holding(marker: str, first_holder: int) -> tuple[int, int] | None:
        """(holder, line position) of the first `marker` line from `first_holder` on."""
        for holder, lines in enumerate(holders[first_holder + 1 :], start=first_holder):
            for position, line in enumerate(lines):
                if _is_marker(line, marker):
                    return holder, position
        return None

    opening = holding(start, -1)
    closing = holding(end, opening[0]) if opening is not None else None
    if opening is None or closing is None:  # _check_markers leaves no half block
        return module
    first, start_position = opening
    last, end_position = closing
    after = holders[last + 1][end_position + 1 :]
    skipped = 0
    while skipped < 2 and skipped < len(after) and after[skipped].comment is None:
        skipped += 1
    kept = [*holders[first + 1][:start_position], *after[skipped:]]
    header = [] if first == -1 else list(module.header)
    body = list(module.body)
    footer = list(module.footer)
    if last == len(body):
        footer = kept
    else:
        body[last] = body[last].with_changes(leading_lines=kept)
    del body[max(first, 0) : last]
    return module.with_changes(header=header, body=body, footer=footer)


def _definition_index(module: libcst.Module, name: str) -> int:
    """The index of the last top-level class or function called `name` (as targets.py picks it)."""
    import libcst

    found = [
        index
        for index, statement in enumerate(module.body)
        if isinstance(statement, (libcst.ClassDef, libcst.FunctionDef)) and statement.name.value == name
    ]
    if not found:
        raise SourceError(f"No definition of {name} at the top level of the file.", "Run drtriton on the current file.")
    return found[-1]


def _dispatch_call(forward_function: str, is_method: bool, replay: bool) -> str:
    flags = ("" if is_method else ", is_method=False") + (", replay=True" if replay else "")
    return f"{DISPATCH_DECORATOR}({forward_function}, {specialization_name(forward_function)}{flags})"


def _is_dispatch_decorator(decorator: libcst.Decorator) -> bool:
    import libcst

    called = decorator.decorator.func if isinstance(decorator.decorator, libcst.Call) else decorator.decorator
    return isinstance(called, libcst.Name) and called.value == DISPATCH_DECORATOR


def _with_decorator(function: libcst.FunctionDef, decorator: libcst.Decorator | None) -> libcst.FunctionDef:
    """`function` with `decorator` outermost, in place of a dispatch decorator a write-back added before;
    decorator None: without the dispatch decorator."""
    existing = list(function.decorators)
    for index, present in enumerate(existing):
        if _is_dispatch_decorator(present):
            if decorator is None:
                return function.with_changes(decorators=existing[:index] + existing[index + 1:])
            existing[index] = present.with_changes(decorator=decorator.decorator)
            return function.with_changes(decorators=existing)
    return function.with_changes(decorators=[decorator, *existing] if decorator is not None else existing)


def _with_decorated_forward(cls: libcst.ClassDef, decorator: libcst.Decorator | None) -> libcst.ClassDef:
    import libcst

    body = list(cls.body.body)
    forwards = [
        index for index, member in enumerate(body) if isinstance(member, libcst.FunctionDef) and member.name.value == "forward"
    ]
    if not forwards:
        raise SourceError(f"{cls.name.value} defines no forward method.", "drtriton replaces exactly that method.")
    body[forwards[-1]] = _with_decorator(body[forwards[-1]], decorator)
    return cls.with_changes(body=cls.body.with_changes(body=body))


def _split_leading_lines(lines: list[libcst.EmptyLine]) -> tuple[list[libcst.EmptyLine], list[libcst.EmptyLine]]:
    """(lines above, the comment block directly above the definition): the block goes between them,
    so the definition keeps its own comments (an input pragma) with no blank line in between."""
    start = len(lines)
    while start > 0 and lines[start - 1].comment is not None and not _is_any_marker(lines[start - 1]):
        start -= 1
    return lines[:start], lines[start:]


def _is_any_marker(line: libcst.EmptyLine) -> bool:
    return line.comment is not None and line.comment.value.startswith((BLOCK_START, BLOCK_END))


def _block_text(
    name: str, provenance: str, program: GeneratedProgram, guards: list[dict[str, Any]], newline: str
) -> str:
    """Start marker, provenance comments, the dispatch helper, the specialization table, the kernels
    (defined only where Triton imports), the end marker and two blank lines; in the file's line ending."""
    comments = [f"# {line}".rstrip() for line in provenance.strip("\n").splitlines()]
    kernels = textwrap.indent(program.kernel_block.strip("\n"), "    ")
    text = "\n".join(
        [
            f"{BLOCK_START}{name}",
            *comments,
            "",
            render_dispatch_helper().rstrip("\n"),
            "",
            "",
            render_specialization(specialization_name(program.forward_function), guards).rstrip("\n"),
            "",
            "",
            "if triton is not None:  # the kernels exist only where Triton is installed",
            "",
            kernels,
            "",
            "else:",
            f"    {program.forward_function} = None",
            "",
            "",
            f"{BLOCK_END}{name}",
            "",
            "",
            "",
        ]
    )
    return text.replace("\n", newline)
