"""Finding targets: the nn.Module classes and torch functions in a user's file that drtriton can optimize.

Runs on every keystroke-level change: it walks only top-level definitions, class bodies, torch functions.
"""

from __future__ import annotations

import ast
import functools
import re
from dataclasses import dataclass

from drtriton_lsp.errors import SourceError
from drtriton_lsp.source.pyfile import (
    ParsedFile,
    definition_start_line,
    parse_file,
    paused_garbage_collection,
)

EXAMPLE_INPUT_FUNCTIONS = ("get_inputs", "get_init_inputs")
_TORCH_MODULE_CLASSES = {"torch.nn.Module", "torch.nn.modules.module.Module"}
_TORCH_NN_NON_MODULES = {
    "torch.nn.Parameter",
    "torch.nn.Buffer",
    "torch.nn.UninitializedParameter",
    "torch.nn.UninitializedBuffer",
}
_DEFINITION_KEYWORD = re.compile(r"(?:async\s+)?(?:def|class)\s+")


@dataclass(frozen=True)
class SourceSpan:
    """A range in the user's file: 1-based lines, 0-based columns counted in characters, end exclusive."""

    start_line: int
    start_column: int
    end_line: int
    end_column: int


@dataclass(frozen=True)
class Target:
    """Something drtriton can optimize.

    kind: "module" (an nn.Module subclass defining forward) or "function" (a top-level function
    computing with torch).
    span: the whole definition, decorators included. name_span: the identifier.
    forward_span: the `forward` method (decorators included) for a module; the span for a function.
    forward_params: forward's (or the function's) parameter names in order, without `self`.
    has_init_params: the module's constructor needs arguments beyond `self` (False for functions).
    """

    name: str
    kind: str
    span: SourceSpan
    name_span: SourceSpan
    forward_span: SourceSpan
    forward_params: list[str]
    has_init_params: bool


@dataclass(frozen=True)
class LocatedTarget:
    """A target together with its syntax nodes, for the modules that edit or copy it.

    init_required_params: constructor arguments without defaults; None when the constructor is
    inherited from outside the file and so unknown.
    """

    target: Target
    definition: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
    forward: ast.FunctionDef | ast.AsyncFunctionDef
    init_required_params: tuple[str, ...] | None


def find_targets(source: str, path: str | None = None) -> list[Target]:
    """Every target in `source`, in file order. Raises SourceError on a syntax error."""
    with paused_garbage_collection():
        return [located.target for located in locate_targets(parse_file(source, path))]


@functools.lru_cache(maxsize=4)
def locate_targets(parsed: ParsedFile) -> tuple[LocatedTarget, ...]:
    """The targets of a parsed file, with their syntax nodes (cached with the parse)."""
    torch_names = {
        name for name, path in parsed.import_bindings.items() if path == "torch" or path.startswith("torch.")
    }
    alternatives = "|".join(map(re.escape, sorted(torch_names)))
    mentions_torch = re.compile(rf"\b(?:{alternatives})\b") if torch_names else None
    module_classes: dict[str, ast.ClassDef] = {}
    located = []
    for statement in parsed.statements:
        if statement.in_generated_block:
            continue
        for node in statement.nodes:
            if isinstance(node, ast.ClassDef) and _is_module_class(parsed, node, module_classes):
                module_classes[node.name] = node
                forward = _method(node, "forward")
                if forward is not None:
                    located.append(_module_target(parsed, node, forward, module_classes))
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and mentions_torch is not None:
                if _is_torch_function(parsed, node, torch_names, mentions_torch):
                    located.append(_function_target(parsed, node))
    return tuple(located)


def find_located_target(parsed: ParsedFile, name: str) -> tuple[LocatedTarget, tuple[LocatedTarget, ...]]:
    """The target called `name` (the last, if defined twice) and all targets; SourceError if absent."""
    located = locate_targets(parsed)
    matches = [candidate for candidate in located if candidate.target.name == name]
    if matches:
        return matches[-1], located
    found = ", ".join(candidate.target.name for candidate in located) or "none"
    raise SourceError(
        f"No target named {name} in {parsed.path or 'the file'} (targets found: {found}).",
        "Pick one of the targets found: an nn.Module subclass that defines forward, "
        "or a top-level function that computes with torch.",
        path=parsed.path,
    )


def _is_module_class(parsed: ParsedFile, node: ast.ClassDef, module_classes: dict[str, ast.ClassDef]) -> bool:
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in module_classes:
            return True
        qualified = parsed.resolve_dotted(base)
        if qualified is not None and _is_torch_module_class(qualified):
            return True
    return False


def _is_torch_module_class(qualified: str) -> bool:
    """torch.nn.Module itself, or a module class torch.nn exports (nn.Linear, nn.Sequential, ...)."""
    if qualified in _TORCH_MODULE_CLASSES or qualified.startswith("torch.nn.modules."):
        return True
    parts = qualified.split(".")
    return (
        len(parts) == 3
        and parts[:2] == ["torch", "nn"]
        and parts[2][:1].isupper()
        and qualified not in _TORCH_NN_NON_MODULES
    )


def _method(node: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    methods = [
        item
        for item in node.body
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name
    ]
    return methods[-1] if methods else None


def _is_torch_function(
    parsed: ParsedFile,
    node: ast.FunctionDef | ast.AsyncFunctionDef,
    torch_names: set[str],
    mentions_torch: re.Pattern,
) -> bool:
    if node.name in EXAMPLE_INPUT_FUNCTIONS:
        return False
    for decorator in node.decorator_list:
        called = decorator.func if isinstance(decorator, ast.Call) else decorator
        qualified = parsed.resolve_dotted(called)
        if qualified is not None and (qualified == "triton" or qualified.startswith("triton.")):
            return False
    body_text = "".join(parsed.lines[node.body[0].lineno - 1 : node.end_lineno])
    if not mentions_torch.search(body_text):
        return False
    return any(
        isinstance(inner, ast.Name) and inner.id in torch_names
        for statement in node.body
        for inner in ast.walk(statement)
    )


def _module_target(
    parsed: ParsedFile,
    node: ast.ClassDef,
    forward: ast.FunctionDef | ast.AsyncFunctionDef,
    module_classes: dict[str, ast.ClassDef],
) -> LocatedTarget:
    required = _init_required_params(parsed, node, module_classes)
    target = Target(
        name=node.name,
        kind="module",
        span=_definition_span(parsed, node),
        name_span=_name_span(parsed, node),
        forward_span=_definition_span(parsed, forward),
        forward_params=parameter_names(forward.args)[1:],
        has_init_params=required is None or bool(required),
    )
    return LocatedTarget(target, node, forward, required)


def _function_target(parsed: ParsedFile, node: ast.FunctionDef | ast.AsyncFunctionDef) -> LocatedTarget:
    span = _definition_span(parsed, node)
    target = Target(
        name=node.name,
        kind="function",
        span=span,
        name_span=_name_span(parsed, node),
        forward_span=span,
        forward_params=parameter_names(node.args),
        has_init_params=False,
    )
    return LocatedTarget(target, node, node, ())


def parameter_names(arguments: ast.arguments) -> list[str]:
    """All parameter names in signature order (`*args` and `**kwargs` by their bare names)."""
    names = [argument.arg for argument in (*arguments.posonlyargs, *arguments.args)]
    if arguments.vararg:
        names.append(arguments.vararg.arg)
    names.extend(argument.arg for argument in arguments.kwonlyargs)
    if arguments.kwarg:
        names.append(arguments.kwarg.arg)
    return names


def required_parameters(arguments: ast.arguments) -> list[str]:
    """Parameters a caller must pass: positional ones before the defaults, keyword-only without one."""
    positional = [argument.arg for argument in (*arguments.posonlyargs, *arguments.args)]
    required = positional[: len(positional) - len(arguments.defaults)]
    required += [
        argument.arg
        for argument, default in zip(arguments.kwonlyargs, arguments.kw_defaults, strict=True)
        if default is None
    ]
    return required


def parameters_without_first(arguments: ast.arguments) -> ast.arguments:
    """A signature minus its first positional parameter (`self`)."""
    posonly = list(arguments.posonlyargs)
    regular = list(arguments.args)
    if posonly:
        posonly.pop(0)
    elif regular:
        regular.pop(0)
    return ast.arguments(
        posonlyargs=posonly,
        args=regular,
        vararg=arguments.vararg,
        kwonlyargs=arguments.kwonlyargs,
        kw_defaults=arguments.kw_defaults,
        kwarg=arguments.kwarg,
        defaults=arguments.defaults,
    )


def method_signature(arguments: ast.arguments) -> str:
    """`self, ` followed by the parameters (annotations and defaults included) as Python text."""
    parameters = ast.unparse(arguments)
    return f"self, {parameters}" if parameters else "self"


def forwarding_arguments(arguments: ast.arguments) -> str:
    """Call arguments that pass each parameter on as received: `x, *rest, key=key, **options`."""
    passed = [argument.arg for argument in (*arguments.posonlyargs, *arguments.args)]
    if arguments.vararg:
        passed.append(f"*{arguments.vararg.arg}")
    passed += [f"{argument.arg}={argument.arg}" for argument in arguments.kwonlyargs]
    if arguments.kwarg:
        passed.append(f"**{arguments.kwarg.arg}")
    return ", ".join(passed)


def _init_required_params(
    parsed: ParsedFile, node: ast.ClassDef, module_classes: dict[str, ast.ClassDef]
) -> tuple[str, ...] | None:
    """Required constructor arguments, following same-file base classes when __init__ is inherited."""
    init = _method(node, "__init__")
    if init is not None:
        return tuple(required_parameters(init.args)[1:])
    for base in node.bases:
        if isinstance(base, ast.Name) and base.id in module_classes:
            return _init_required_params(parsed, module_classes[base.id], module_classes)
        qualified = parsed.resolve_dotted(base)
        if qualified in _TORCH_MODULE_CLASSES:
            return ()
    return None


def _definition_span(parsed: ParsedFile, node: ast.stmt) -> SourceSpan:
    start_line = definition_start_line(node, parsed.lines)
    if start_line == node.lineno:
        start_column = parsed.char_column(node.lineno, node.col_offset)
    else:
        start_column = parsed.line_text(start_line).index("@")
    end_line = node.end_lineno or node.lineno
    return SourceSpan(
        start_line, start_column, end_line, parsed.char_column(end_line, node.end_col_offset or 0)
    )


def _name_span(parsed: ParsedFile, node: ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) -> SourceSpan:
    column = parsed.char_column(node.lineno, node.col_offset)
    keyword = _DEFINITION_KEYWORD.match(parsed.line_text(node.lineno), column)
    start = keyword.end() if keyword else column
    return SourceSpan(node.lineno, start, node.lineno, start + len(node.name))
