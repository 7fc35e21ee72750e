"""The schedule-script grammar for one graph: what a script writer's sampling is held to, as it is sampled.

A server that supports vLLM's structured outputs gets `answer_pattern` (a regular expression); the transformers backend
checks each next token with `ScriptGrammar`, which also holds each op to one place. Imports no torch.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.models.formats import END_LINE

# Characters that mean something in a regular expression; everything a script holds besides them is literal.
REGEX_SPECIAL = set(".^$*+?{}[]\\|()")


# Templates whose kernel is built around no anchor op (elementwise ops alone), and the one built on reductions.
POINTWISE_TEMPLATE, ROW_TEMPLATE, REDUCE_TEMPLATE = "pointwise", "row", "reduce"


@dataclass(frozen=True)
class ScriptConstraint:
    """What a script for one graph may be: each step matches `line` (a regular expression), and the steps place each
    of `ops` (the ops a script must place, in graph order) exactly once before the end line, each after the ops it
    reads (`reads[i]`: the ops that `ops[i]` reads, directly or through views) and a kernel's ops in graph order.

    templates[i]: the templates whose kernel may hold `ops[i]` (empty: only `keep`); anchors[i]: the template that
    `ops[i]` anchors ("" for an elementwise op). A kernel of an anchored template holds exactly one op it anchors, a
    row kernel at least one reduction. Empty tuples: no template rule (any op in any kernel)."""

    line: str
    ops: tuple[str, ...]
    reads: tuple[tuple[str, ...], ...] = ()
    templates: tuple[tuple[str, ...], ...] = ()
    anchors: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "ops": list(self.ops), "reads": [list(read) for read in self.reads],
                "templates": [list(names) for names in self.templates], "anchors": list(self.anchors)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ScriptConstraint":
        return cls(data["line"], tuple(data["ops"]), tuple(tuple(read) for read in data.get("reads", [])),
                   tuple(tuple(names) for names in data.get("templates", [])), tuple(data.get("anchors", [])))


def script_constraint(graph: OpGraph) -> ScriptConstraint:
    """The constraint for scripts over `graph`: its schedulable ops (views and shape arithmetic are never listed, and
    a value they pass on counts as read from the op that computed it)."""
    from drtriton_lsp.compiler.fragments import schedulable_ops

    ops = tuple(schedulable_ops(graph))
    nodes = {node.name: node for node in graph.nodes}

    def read_ops(name: str, seen: set[str]) -> set[str]:
        found: set[str] = set()
        for ref in nodes[name].input_refs():
            if ref in ops:
                found.add(ref)
            elif ref in nodes and ref not in seen:
                seen.add(ref)
                found |= read_ops(ref, seen)
        return found

    reads = tuple(tuple(sorted(read_ops(op, set()), key=ops.index)) for op in ops)
    templates, anchors = kernel_templates(graph, ops)
    return ScriptConstraint(script_line_pattern(ops, templates), ops, reads, templates, anchors)


def kernel_templates(graph: OpGraph, ops: Sequence[str]) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]:
    """Per op, the templates whose kernel may hold it and the template it anchors, as the compiler's planner decides:
    an elementwise op goes in any kernel; an anchored op in its own template's kernel (a reduction also in a row
    kernel, or folded at the end of a template that reduces its output); an op no template computes is kept."""
    from drtriton_lsp.compiler.partition import Anchored, Pointwise
    from drtriton_lsp.compiler.planner import classify
    from drtriton_lsp.compiler.templates import TEMPLATES

    roles = classify(graph).roles
    folding = [name for name, template in TEMPLATES.items() if template.reduces_output]
    templates, anchors = [], []
    for op in ops:
        role = roles.get(op)
        if isinstance(role, Pointwise):
            templates.append(tuple(TEMPLATES))
            anchors.append("")
        elif isinstance(role, Anchored):
            extra = [ROW_TEMPLATE, *folding] if role.template == REDUCE_TEMPLATE else []
            templates.append(tuple(name for name in TEMPLATES if name == role.template or name in extra))
            anchors.append(role.template)
        else:
            templates.append(())
            anchors.append("")
    return tuple(templates), tuple(anchors)


def script_line_pattern(ops: Sequence[str], templates: Sequence[Sequence[str]] = ()) -> str:
    """One step (no newline): `keep OP` or `kernel TEMPLATE OP,OP,... NAME=VALUE ...` over `ops`, each template with
    the ops it may hold (`templates`, per op; empty: any op in any template) and its parameters in order with their
    allowed values. How many anchor ops a kernel holds, and the order the steps compute values in, are beyond a
    regular expression: the token check (and the compiler) hold those."""
    from drtriton_lsp.compiler.templates import TEMPLATES

    kernels = []
    for name, template in TEMPLATES.items():
        held = [op for number, op in enumerate(ops) if not templates or name in templates[number]]
        if not held:
            continue
        op = _any_of(held)
        parameters = "".join(
            f" {_literal(spec.name)}={_any_of(spec.render(value) for value in spec.values)}"
            for spec in template.parameters
        )
        kernels.append(f"{_literal(name)} {op}(,{op})*{parameters}")
    keep = f"keep {_any_of(ops)}"
    return f"({keep}|kernel ({'|'.join(kernels)}))" if kernels else f"({keep})"


def answer_pattern(line_pattern: str) -> str:
    """A whole answer: one or more steps (`line_pattern`), each ending in a newline, then the end line (its newline
    optional, as a server stops at the end line). What an OpenAI-compatible server's structured outputs get: a
    regular expression cannot say "each op once", so a server's answers can still repeat or leave out an op."""
    return f"({line_pattern}\n)+{_literal(END_LINE)}\n?"


class ScriptGrammar:
    """Decides, while an answer is sampled, whether a piece of text may come next: every finished line is a step that
    places ops not placed before, each after the ops it reads, a kernel's in graph order and each in a template that
    can hold it; a kernel holds the one op its template is built around (a row kernel a reduction); the end line
    comes once every op is placed; and the unfinished line can still become such a step (a name being written can
    still become an op or template that may come there, so sampling never ends in a line with no way on). The text
    sampled so far was allowed piece by piece, so only the lines the new piece touches are matched."""

    def __init__(self, constraint: ScriptConstraint):
        import regex  # the `regex` module matches partial text; transformers depends on it, and only samplers use this

        self._step = regex.compile(constraint.line)
        self._order = constraint.ops
        self._ops = frozenset(constraint.ops)
        self._position = {op: number for number, op in enumerate(constraint.ops)}
        self._reads = dict(zip(constraint.ops, (frozenset(read) for read in constraint.reads)))
        self._templates = dict(zip(constraint.ops, (frozenset(names) for names in constraint.templates)))
        self._anchors = dict(zip(constraint.ops, constraint.anchors))
        self._template_names = sorted({name for names in constraint.templates for name in names})
        self._last: tuple[str, frozenset[str], str] = ("", frozenset(), "")

    def allows(self, text: str, piece: str) -> bool:
        """Whether `text + piece` is the start of an answer (`text`: what the answer holds so far, itself allowed)."""
        placed_before, line = self._read(text)
        placed = set(placed_before)
        *finished, open_line = (line + piece).split("\n")
        for number, line_text in enumerate(finished):
            if line_text == END_LINE:
                return placed == self._ops and number == len(finished) - 1 and open_line == ""
            ops = _placed_ops(line_text, finished=True)
            if self._step.fullmatch(line_text) is None or not self._may_place(ops, placed, _template(line_text), True):
                return False
            placed.update(ops)
        if placed == self._ops:
            return END_LINE.startswith(open_line)
        ops = _placed_ops(open_line, finished=False)
        template, closed = _template(open_line), len(open_line.split(" ")) > 3
        if self._step.fullmatch(open_line, partial=True) is None or not self._may_place(ops, placed, template, closed):
            return False
        starting = _template_being_written(open_line)
        if starting is not None and self._templates:
            return any(
                name.startswith(starting) and self._kernel_can_hold(name, placed, []) for name in self._template_names
            )
        naming = _name_being_written(open_line)
        return naming is None or any(
            op.startswith(naming) and self._may_place([*ops, op], placed, template, False) for op in self._ops - placed
        )

    def _read(self, text: str) -> tuple[frozenset[str], str]:
        """The ops the finished lines of `text` place, and its unfinished line; remembered for the last text, since a
        sampler asks about many pieces after the same text."""
        if self._last[0] != text:
            done, _, line = text.rpartition("\n")
            placed: set[str] = set()
            for finished_line in done.split("\n") if "\n" in text else ():
                placed.update(_placed_ops(finished_line, finished=True))
            self._last = (text, frozenset(placed), line)
        return self._last[1], self._last[2]

    def _may_place(self, ops: list[str], placed: set[str], template: str | None, closed: bool) -> bool:
        """Whether one step may place `ops` (in its order) after `placed`: each op new, in graph order, and reading
        only ops placed before it (by earlier steps, or earlier in this kernel); in a kernel of `template`, each op
        one it can hold, and (its op list `closed`, or still growing) the op it is built around present or to come."""
        available = set(placed)
        previous = -1
        for op in ops:
            if op in available or self._position[op] <= previous or not self._reads.get(op, frozenset()) <= available:
                return False
            available.add(op)
            previous = self._position[op]
        if template is None or not self._templates:
            return True
        if not all(template in self._templates[op] for op in ops):
            return False
        centre = _centre(template)
        if centre is None:
            return True
        centres = sum(self._anchors[op] == centre for op in ops)
        folded = sum(self._anchors[op] == REDUCE_TEMPLATE for op in ops) if centre != REDUCE_TEMPLATE else 0
        if template != ROW_TEMPLATE and (centres > 1 or folded > 1):
            return False
        if centres:
            return True
        return not closed and self._kernel_can_hold(template, placed, ops)

    def _kernel_can_hold(self, template: str, placed: set[str], ops: list[str]) -> bool:
        """Whether a kernel of `template` that holds `ops` so far can still hold what it needs: its centre op (for a
        pointwise kernel, any op), reached through elementwise ops that can each come next."""
        centre = _centre(template)
        if centre is not None and any(self._anchors[op] == centre for op in ops):
            return True
        if centre is None and ops:
            return True
        available = set(placed) | set(ops)
        last = max((self._position[op] for op in ops), default=-1)
        for op in self._order[last + 1:]:
            if op in available or template not in self._templates[op] or not self._reads[op] <= available:
                continue
            if centre is None or self._anchors[op] == centre:
                return True
            if self._anchors[op] == "":
                available.add(op)
        return False

    @staticmethod
    def finished(text: str) -> bool:
        """Whether an allowed `text` is a whole answer (steps, then the end line): only then may sampling end."""
        return "\n" in text and text.rstrip("\n").endswith("\n" + END_LINE)


def _centre(template: str) -> str | None:
    """The anchor a kernel of `template` is built around: its own ops, reductions for a row kernel, none pointwise."""
    if template == POINTWISE_TEMPLATE:
        return None
    return REDUCE_TEMPLATE if template == ROW_TEMPLATE else template


def _template(line: str) -> str | None:
    """The template of a kernel line once its name is written (None for a keep line, or before)."""
    words = line.split(" ")
    return words[1] if words[0] == "kernel" and len(words) > 2 else None


def _template_being_written(line: str) -> str | None:
    """The template name an unfinished kernel line is in the middle of ("" right after `kernel `; a line whose first
    word can only become `kernel` counts as starting one), else None."""
    words = line.split(" ")
    if words[0] == "kernel" and len(words) == 2:
        return words[1]
    if len(words) == 1 and words[0] and "kernel".startswith(words[0]) and not "keep".startswith(words[0]):
        return ""
    return None


def _placed_ops(line: str, *, finished: bool) -> list[str]:
    """The ops a step line places, as far as it has named them (an unfinished line's last name may still grow)."""
    words = line.split(" ")
    if words[0] == "keep":
        return words[1:2] if finished else []
    if words[0] != "kernel" or len(words) < 3:
        return []
    names = words[2].split(",")
    return names if finished or len(words) > 3 else names[:-1]


def _name_being_written(line: str) -> str | None:
    """The op name an unfinished step line is in the middle of ("" right after `keep ` or a comma), else None."""
    words = line.split(" ")
    if words[0] == "keep" and len(words) == 2:
        return words[1]
    if words[0] == "kernel" and len(words) == 3:
        return words[2].split(",")[-1]
    return None


def _literal(text: str) -> str:
    return "".join("\\" + character if character in REGEX_SPECIAL else character for character in text)


def _any_of(words: Iterable[str]) -> str:
    unique = list(dict.fromkeys(words))
    return "(" + "|".join(_literal(word) for word in unique) + ")"
