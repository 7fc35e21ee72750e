"""One parse of a Python file, shared by the source layer: syntax tree, lines, top-level statements.

Also the small text tools the layer shares: import bindings, names a statement reads, chunk layout.
"""

# NOTE: the standard `ast`, not libcst: on a 3,000-line file `ast.parse` takes ~30-50 ms where
# libcst's parser takes ~460 ms and its scope analysis ~1.6 s, too slow for keystroke-level
# requests. Copies slice the original lines, so text survives byte for byte; only write-back
# (writeback.py) edits a libcst tree. Nothing here executes the file.

from __future__ import annotations

import ast
import builtins
import contextlib
import functools
import gc
import re
import symtable
from collections.abc import Iterator
from dataclasses import dataclass

from drtriton_lsp.errors import SourceError

DISPATCH_DECORATOR = "drtriton_dispatch"
BLOCK_START = "# >>> drtriton: generated Triton kernels for "
BLOCK_END = "# <<< drtriton: end of generated code for "
BLOCK_MARKER = re.compile(
    r"# (>>>|<<<) drtriton: (?:generated Triton kernels for|end of generated code for) (\w+)[ \t]*[\r\n]*\Z"
)
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
# Names every module has without binding them.
BUILTIN_NAMES = frozenset(dir(builtins)) | {"__file__", "__builtins__", "__annotations__"}


def split_lines(source: str) -> list[str]:
    """The lines of `source` with their endings, numbered as `ast` numbers them (\\n, \\r\\n, \\r)."""
    return _LINE.findall(source)


def newline_of(source: str) -> str:
    """The file's line ending ("\\n" when it has none yet)."""
    match = re.search(r"\r\n|\r|\n", source)
    return match.group(0) if match else "\n"


@dataclass(frozen=True)
class GeneratedBlock:
    """Lines start_line..end_line (1-based, inclusive) hold drtriton's generated code for `name`."""

    name: str
    start_line: int
    end_line: int


@dataclass(frozen=True)
class TopLevelStatement:
    """One or more module-level statements sharing lines (`a = 1; b = 2` is one).

    start_line/end_line: 1-based, inclusive, from the first decorator to the last line.
    binds: module-level names the statement assigns; mutates: names whose attributes or items it
    assigns (`REGISTRY["gelu"] = gelu` mutates REGISTRY).
    """

    nodes: tuple[ast.stmt, ...]
    start_line: int
    end_line: int
    binds: frozenset[str]
    mutates: frozenset[str]
    in_generated_block: bool

    @property
    def is_import(self) -> bool:
        return all(isinstance(node, (ast.Import, ast.ImportFrom)) for node in self.nodes)

    @property
    def is_future_import(self) -> bool:
        return all(isinstance(node, ast.ImportFrom) and node.module == "__future__" for node in self.nodes)

    @property
    def is_star_import(self) -> bool:
        return any(isinstance(node, ast.ImportFrom) and node.names[0].name == "*" for node in self.nodes)

    @property
    def is_compound(self) -> bool:
        """True for def/class/if/... (laid out with blank lines around them)."""
        return not all(isinstance(node, _SIMPLE_STATEMENTS) for node in self.nodes)

    @property
    def is_main_guard(self) -> bool:
        """`if __name__ == "__main__":`: never part of a task."""
        node = self.nodes[0]
        if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
            return False
        sides = [node.test.left, *node.test.comparators]
        names = [side for side in sides if isinstance(side, ast.Name) and side.id == "__name__"]
        mains = [side for side in sides if isinstance(side, ast.Constant) and side.value == "__main__"]
        return bool(names and mains)

    def defines(self, name: str, kind: type | tuple[type, ...]) -> bool:
        return any(isinstance(node, kind) and getattr(node, "name", None) == name for node in self.nodes)


_SIMPLE_STATEMENTS = (
    ast.Expr,
    ast.Assign,
    ast.AnnAssign,
    ast.AugAssign,
    ast.Import,
    ast.ImportFrom,
    ast.Pass,
    ast.Delete,
    ast.Global,
    ast.Nonlocal,
    ast.Assert,
    ast.Raise,
    ast.Return,
    ast.Break,
    ast.Continue,
)


class ParsedFile:
    """A parsed Python file: `tree`, `lines` (with endings) and its top-level statements."""

    def __init__(self, source: str, path: str | None, tree: ast.Module):
        self.source = source
        self.path = path
        self.tree = tree
        self.lines = split_lines(source)
        self.generated_blocks = generated_blocks(self.lines)
        self.statements = _top_level_statements(self)
        self.import_bindings = import_bindings(tree.body)

    def line_text(self, line: int) -> str:
        """Line `line` (1-based) without its ending; "" past the end."""
        if 1 <= line <= len(self.lines):
            return self.lines[line - 1].rstrip("\r\n")
        return ""

    def char_column(self, line: int, byte_column: int) -> int:
        """`ast` columns count UTF-8 bytes; editors and Python strings count characters."""
        text = self.line_text(line)
        if text.isascii():
            return byte_column
        return len(text.encode("utf-8")[:byte_column].decode("utf-8", errors="replace"))

    def in_generated_block(self, line: int) -> bool:
        return any(block.start_line <= line <= block.end_line for block in self.generated_blocks)

    def resolve_dotted(self, expression: ast.expr) -> str | None:
        """The imported object an expression names: `nn.Module` -> "torch.nn.Module" after
        `import torch.nn as nn`; None when its root is not an imported name."""
        attributes = []
        while isinstance(expression, ast.Attribute):
            attributes.append(expression.attr)
            expression = expression.value
        if not isinstance(expression, ast.Name) or expression.id not in self.import_bindings:
            return None
        return ".".join([self.import_bindings[expression.id], *reversed(attributes)])

    def leading_import_end_line(self) -> int:
        """The line after which new imports go: after the module docstring, `from __future__`
        imports and the imports that open the file (0: at the very top)."""
        body = self.tree.body
        end_line = 0
        index = 0
        if body and is_docstring(body[0]):
            end_line = body[0].end_lineno or body[0].lineno
            index = 1
        while index < len(body) and isinstance(body[index], (ast.Import, ast.ImportFrom)):
            end_line = body[index].end_lineno or body[index].lineno
            index += 1
        if end_line == 0 and body:
            return definition_start_line(body[0], self.lines) - 1
        return end_line


@functools.lru_cache(maxsize=4)
def parse_file(source: str, path: str | None = None) -> ParsedFile:
    """Parse `source`; a syntax error becomes a SourceError naming the line and column.

    Cached: a language server asks several questions about the same text in a row.
    """
    try:
        with paused_garbage_collection():
            tree = ast.parse(source, filename=path or "<file>")
    except SyntaxError as error:
        line = error.lineno or 1
        column = error.offset or 1
        # Not error.text: for a path that exists, Python quotes the file on disk, not the text being parsed
        # (an editor's unsaved buffer).
        source_lines = source.splitlines()
        snippet = (source_lines[line - 1] if line <= len(source_lines) else error.text or "").strip()
        where = f"`{snippet}` (line {line})" if snippet else f"line {line}"
        raise SourceError(
            f"{path or 'The file'} has a syntax error at line {line}, column {column}: {error.msg}",
            f"Fix the syntax error at {where}, then run again.",
            path=path,
            line=line,
        ) from None
    except ValueError as error:  # e.g. "source code string cannot contain null bytes"
        raise SourceError(
            f"{path or 'The file'} cannot be parsed as Python: {error}",
            "Save the file as plain UTF-8 Python source, then run again.",
            path=path,
        ) from None
    return ParsedFile(source, path, tree)


@contextlib.contextmanager
def paused_garbage_collection() -> Iterator[None]:
    """Hold off Python's cycle collector while building a syntax tree.

    NOTE: a 3,000-line file makes ~20k tree nodes, and the collector re-scans them again and again
    while they are built (here, p90 of find_targets on 3,000 lines: ~150 ms -> ~80 ms). Trees have no
    reference cycles, so nothing is left uncollected; the collector resumes and scans them once.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


def definition_start_line(node: ast.stmt, lines: list[str]) -> int:
    """The first line of a statement, counting decorators (the line holding the first `@`)."""
    decorators = getattr(node, "decorator_list", None)
    if not decorators:
        return node.lineno
    line = decorators[0].lineno
    while line > 1 and not lines[line - 1].lstrip().startswith("@"):
        line -= 1
    return line


def dispatch_decorator_lines(parsed: ParsedFile, function: ast.FunctionDef | ast.AsyncFunctionDef) -> range:
    """The lines of the `@drtriton_dispatch(...)` decorator a write-back put on `function` (empty if none)."""
    for decorator in function.decorator_list:
        called = decorator.func if isinstance(decorator, ast.Call) else decorator
        if isinstance(called, ast.Name) and called.id == DISPATCH_DECORATOR:
            start = decorator.lineno
            while start > 1 and not parsed.line_text(start).lstrip().startswith("@"):
                start -= 1
            return range(start, (decorator.end_lineno or decorator.lineno) + 1)
    return range(0)


def import_bindings(statements: list[ast.stmt]) -> dict[str, str]:
    """Names bound by imports at this level (descending into if/try/with, not into defs),
    each mapped to the dotted path it refers to: `import torch.nn as nn` -> {"nn": "torch.nn"}.
    Relative imports map to a path starting with ".".
    """
    bindings: dict[str, str] = {}
    for node in statements:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.asname:
                    bindings[alias.asname] = alias.name
                else:
                    root = alias.name.split(".")[0]
                    bindings[root] = root
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            for alias in node.names:
                if alias.name != "*":
                    separator = "" if module.endswith(".") else "."
                    bindings[alias.asname or alias.name] = f"{module}{separator}{alias.name}"
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody"):
                bindings.update(import_bindings(getattr(node, field, None) or []))
            for handler in getattr(node, "handlers", None) or []:
                bindings.update(import_bindings(handler.body))
    return bindings


def missing_imports(required: list[str] | tuple[str, ...], existing: dict[str, str]) -> list[str]:
    """The import lines among `required` whose names `existing` (see `import_bindings`) lacks."""
    missing = []
    bound = dict(existing)
    for line in dict.fromkeys(required):
        wanted = import_bindings(ast.parse(line).body)
        if any(bound.get(name) != path for name, path in wanted.items()):
            missing.append(line)
            bound.update(wanted)
    return missing


def global_names_used(text: str) -> set[str]:
    """Module-level names a piece of top-level code reads, at module level or from inside its
    functions and classes (Python's own symbol tables, so local names never count)."""
    table = symtable.symtable(text, "<statement>", "exec")
    names = {symbol.get_name() for symbol in table.get_symbols() if symbol.is_referenced()}
    pending = list(table.get_children())
    while pending:
        child = pending.pop()
        names.update(symbol.get_name() for symbol in child.get_symbols() if symbol.is_global())
        pending.extend(child.get_children())
    return names


def is_docstring(node: ast.stmt) -> bool:
    return (
        isinstance(node, ast.Expr)
        and isinstance(node.value, ast.Constant)
        and isinstance(node.value.value, str)
    )


def generated_blocks(lines: list[str]) -> list[GeneratedBlock]:
    """Blocks between a start marker and the matching end marker (unterminated ones are ignored)."""
    blocks = []
    open_blocks: dict[str, int] = {}
    for number, kind, name in block_markers(lines):
        if kind == ">>>":
            open_blocks[name] = number
        elif name in open_blocks:
            blocks.append(GeneratedBlock(name, open_blocks.pop(name), number))
    return sorted(blocks, key=lambda block: block.start_line)


def block_markers(lines: list[str]) -> list[tuple[int, str, str]]:
    """(line, ">>>" or "<<<", target name) for each block marker line."""
    return [
        (number, match.group(1), match.group(2))
        for number, line in enumerate(lines, start=1)
        if line.startswith("# ") and (match := BLOCK_MARKER.match(line))
    ]


def _top_level_statements(parsed: ParsedFile) -> list[TopLevelStatement]:
    groups: list[list[ast.stmt]] = []
    for node in parsed.tree.body:
        if groups and node.lineno <= (groups[-1][-1].end_lineno or groups[-1][-1].lineno):
            groups[-1].append(node)
        else:
            groups.append([node])
    statements = []
    for group in groups:
        start_line = definition_start_line(group[0], parsed.lines)
        binds: set[str] = set()
        mutates: set[str] = set()
        for node in group:
            _collect_module_level_bindings(node, binds, mutates)
        statements.append(
            TopLevelStatement(
                nodes=tuple(group),
                start_line=start_line,
                end_line=group[-1].end_lineno or group[-1].lineno,
                binds=frozenset(binds),
                mutates=frozenset(mutates),
                in_generated_block=parsed.in_generated_block(start_line),
            )
        )
    return statements


def _collect_module_level_bindings(node: ast.AST, binds: set[str], mutates: set[str]) -> None:
    """Names a module-level statement binds, without entering function or class bodies."""
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        binds.add(node.name)
        return
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        binds.update(import_bindings([node]))
        return
    if isinstance(node, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
        return
    if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
        binds.add(node.id)
    elif isinstance(node, (ast.Attribute, ast.Subscript)) and isinstance(node.ctx, ast.Store):
        root = node.value
        while isinstance(root, (ast.Attribute, ast.Subscript)):
            root = root.value
        if isinstance(root, ast.Name):
            mutates.add(root.id)
    elif isinstance(node, ast.ExceptHandler) and node.name:
        binds.add(node.name)
    elif isinstance(node, (ast.MatchAs, ast.MatchStar)) and node.name:
        binds.add(node.name)
    elif isinstance(node, ast.MatchMapping) and node.rest:
        binds.add(node.rest)
    for child in ast.iter_child_nodes(node):
        _collect_module_level_bindings(child, binds, mutates)


def leading_comment_start_line(parsed: ParsedFile, first_line: int) -> int:
    """The first line of the comment block directly above `first_line` (no blank line between;
    drtriton's block markers end it); `first_line` itself when there is none."""
    line = first_line
    while line > 1:
        above = parsed.line_text(line - 1).lstrip()
        if not above.startswith("#") or above.startswith((BLOCK_START, BLOCK_END)):
            break
        line -= 1
    return line


@dataclass(frozen=True)
class Chunk:
    """Top-level code for a new module: its lines (each ending in "\\n"), per line the user's line
    it was copied from (None for generated lines), and its kind for the layout: "import",
    "statement" (other simple statements) or "definition" (def, class and other compound ones)."""

    lines: tuple[str, ...]
    origins: tuple[int | None, ...]
    kind: str

    @classmethod
    def generated(cls, text: str, kind: str = "definition") -> Chunk:
        lines = tuple(line + "\n" for line in text.strip("\n").split("\n"))
        return cls(lines, (None,) * len(lines), kind)

    @classmethod
    def copied(cls, numbered_lines: list[tuple[int, str]], statement: TopLevelStatement) -> Chunk:
        """Lines of the user's file given as (line number, text), line endings normalized to "\\n"
        as Python itself does when it reads a file."""
        return cls(
            tuple(text.rstrip("\r\n") + "\n" for _, text in numbered_lines),
            tuple(number for number, _ in numbered_lines),
            "definition" if statement.is_compound else "import" if statement.is_import else "statement",
        )


def join_chunks(chunks: list[Chunk]) -> tuple[str, list[int | None]]:
    """Lay chunks out as a module: two blank lines around definitions, one where imports end,
    none inside a run of simple statements. Returns the text and, per line, the user's line or None."""
    lines: list[str] = []
    origins: list[int | None] = []
    previous: Chunk | None = None
    for chunk in chunks:
        if previous is not None:
            if "definition" in (previous.kind, chunk.kind):
                blank_lines = 2
            else:
                blank_lines = 1 if previous.kind != chunk.kind else 0
            lines += ["\n"] * blank_lines
            origins += [None] * blank_lines
        lines += chunk.lines
        origins += chunk.origins
        previous = chunk
    return "".join(lines), origins
