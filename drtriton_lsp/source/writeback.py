"""Write-back: the edit that puts verified Triton kernels into the user's file, next to the code they replace.

A marked block above the target plus one dispatch decorator: whole lines only, replaced when written again.
"""

from __future__ import annotations

import ast

from drtriton_lsp.errors import SourceError
from drtriton_lsp.source.candidate import GeneratedProgram
from drtriton_lsp.source.pyfile import (
    BLOCK_END,
    BLOCK_START,
    DISPATCH_DECORATOR,
    ParsedFile,
    block_markers,
    definition_start_line,
    dispatch_decorator_lines,
    generated_blocks,
    import_bindings,
    leading_comment_start_line,
    missing_imports,
    newline_of,
    parse_file,
    split_lines,
)
from drtriton_lsp.source.targets import find_located_target

DISPATCH_IMPORTS = (
    "import functools",
    "import os",
    "import torch",
    "import triton",
    "import triton.language as tl",
)

# The decorator every generated block relies on; defined once, in the file's first block.
DISPATCH_HELPER = '''\
def drtriton_dispatch(triton_forward, mode_dependent, is_method=True):
    """Run `triton_forward` in place of the decorated PyTorch code when that is safe, else the original.

    Safe means: no gradient is needed (the kernels have no backward pass); every tensor argument,
    parameter and buffer is on a CUDA device, or TRITON_INTERPRET=1 runs Triton on the CPU; and,
    when the result depends on the mode (dropout, batch norm), the module is in eval mode.
    The original stays callable as `.reference`. A plain function's Triton forward was generated
    for a stateless wrapper module, so it receives None for `self`.
    """

    def tensors_in(values):
        for value in values:
            if isinstance(value, torch.Tensor):
                yield value
            elif isinstance(value, (list, tuple)):
                yield from tensors_in(value)
            elif isinstance(value, dict):
                yield from tensors_in(value.values())

    def decorate(reference):
        @functools.wraps(reference)
        def dispatch(*args, **kwargs):
            module = args[0] if is_method and args and isinstance(args[0], torch.nn.Module) else None
            tensors = list(tensors_in((*args, *kwargs.values())))
            if module is not None:
                tensors += [*module.parameters(), *module.buffers()]
            needs_grad = torch.is_grad_enabled() and any(tensor.requires_grad for tensor in tensors)
            interpreted = os.environ.get("TRITON_INTERPRET") == "1"
            on_triton_device = bool(tensors) and (interpreted or all(tensor.is_cuda for tensor in tensors))
            training = mode_dependent and module is not None and module.training
            if needs_grad or training or not on_triton_device:
                return reference(*args, **kwargs)
            if is_method:
                return triton_forward(*args, **kwargs)
            return triton_forward(None, *args, **kwargs)

        dispatch.reference = reference
        return dispatch

    return decorate
'''


def write_back(
    user_source: str, target_name: str, program: GeneratedProgram, provenance: str, *, mode_dependent: bool
) -> str:
    """The user's file with `program` written in for the target `target_name`.

    provenance: plain text (any number of lines) written as comments at the top of the block.
    mode_dependent: the target behaves differently in training mode (dropout, batch norm), so
    the kernels are used only in eval mode.
    """
    parsed = parse_file(user_source)
    find_located_target(parsed, target_name)
    _check_markers(parsed)
    source = _without_generated_block(parsed, target_name)
    source = _without_dispatch_helper(parse_file(source))
    parsed = parse_file(source)
    located, _ = find_located_target(parsed, target_name)
    newline = newline_of(user_source)
    lines = list(parsed.lines)

    # (first line index, line count replaced, new lines); applied bottom-up so indices stay valid.
    edits: list[tuple[int, int, list[str]]] = []
    decorator_line = _dispatch_decorator_line(
        parsed, located.forward, program.forward_function, mode_dependent, located.target.kind == "module"
    )
    existing = dispatch_decorator_lines(parsed, located.forward)
    if existing:
        edits.append((existing.start - 1, len(existing), [decorator_line]))
    else:
        edits.append((definition_start_line(located.forward, parsed.lines) - 1, 0, [decorator_line]))
    block_line = leading_comment_start_line(parsed, located.target.span.start_line)
    edits.append((block_line - 1, 0, _generated_block(target_name, provenance, program.kernel_block)))
    earlier_imports = import_bindings(
        [
            node
            for statement in parsed.statements
            if statement.start_line < block_line
            for node in statement.nodes
        ]
    )
    added_imports = missing_imports([*DISPATCH_IMPORTS, *program.required_imports], earlier_imports)
    edits.append((parsed.leading_import_end_line(), 0, added_imports))

    for start, count, new_lines in sorted(edits, key=lambda edit: edit[0], reverse=True):
        lines[start : start + count] = [line + newline for line in new_lines]
    return _with_dispatch_helper(lines, newline)


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
        "or delete the whole block and the @drtriton_dispatch line, then run again.",
        path=parsed.path,
        line=line,
    )


def _without_generated_block(parsed: ParsedFile, name: str) -> str:
    """The source without the block generated for `name` and the two blank lines that follow it."""
    lines = list(parsed.lines)
    for block in reversed(parsed.generated_blocks):
        if block.name == name:
            del lines[block.start_line - 1 : _after_blank_lines(lines, block.end_line)]
    return "".join(lines)


def _without_dispatch_helper(parsed: ParsedFile) -> str:
    """The source without the dispatch helper in generated blocks (put back in the first block later)."""
    lines = list(parsed.lines)
    for statement in reversed(parsed.statements):
        if statement.in_generated_block and statement.defines(DISPATCH_DECORATOR, ast.FunctionDef):
            del lines[statement.start_line - 1 : _after_blank_lines(lines, statement.end_line)]
    return "".join(lines)


def _after_blank_lines(lines: list[str], end_line: int, most: int = 2) -> int:
    """The 0-based index after line `end_line` and up to `most` blank lines following it."""
    index = end_line
    while index < len(lines) and index < end_line + most and not lines[index].strip():
        index += 1
    return index


def _dispatch_decorator_line(
    parsed: ParsedFile,
    forward: ast.FunctionDef | ast.AsyncFunctionDef,
    forward_function: str,
    mode_dependent: bool,
    is_method: bool,
) -> str:
    first_line = parsed.line_text(definition_start_line(forward, parsed.lines))
    indent = first_line[: len(first_line) - len(first_line.lstrip())]
    method_flag = "" if is_method else ", is_method=False"
    return f"{indent}@{DISPATCH_DECORATOR}({forward_function}, mode_dependent={mode_dependent}{method_flag})"


def _generated_block(name: str, provenance: str, kernel_block: str) -> list[str]:
    """Start marker, provenance comments, a blank line, the kernels, the end marker, blank lines."""
    comments = [f"# {line}".rstrip() for line in provenance.strip("\n").splitlines()]
    kernels = split_lines(kernel_block.strip("\n") + "\n")
    return [
        f"{BLOCK_START}{name}",
        *comments,
        "",
        *(line.rstrip("\r\n") for line in kernels),
        "",
        "",
        f"{BLOCK_END}{name}",
        "",
        "",
    ]


def _with_dispatch_helper(lines: list[str], newline: str) -> str:
    """Put the dispatch helper in the file's first generated block, after its provenance comments
    and the blank line that ends them: it must exist before any decorated definition runs."""
    first = generated_blocks(lines)[0]
    inside = range(first.start_line, first.end_line - 1)  # 0-based indices of the lines between the markers
    blank = next((index for index in inside if not lines[index].strip()), first.end_line - 2)
    helper = [line + newline for line in DISPATCH_HELPER.split("\n")[:-1]] + [newline, newline]
    lines[blank + 1 : blank + 1] = helper
    return "".join(lines)
