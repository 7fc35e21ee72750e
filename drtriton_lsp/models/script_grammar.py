"""The schedule-script grammar for one graph, as regular expressions: what a script writer's sampling is held to.

A server that supports vLLM's structured outputs gets `answer_pattern`; the transformers backend checks each next
token with `ScriptGrammar` (line by line, so a check costs one short line's match). Imports no torch.
"""

from __future__ import annotations

from typing import Iterable

from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.models.formats import END_LINE

# Characters that mean something in a regular expression; everything a script holds besides them is literal.
REGEX_SPECIAL = set(".^$*+?{}[]\\|()")


def script_line_pattern(graph: OpGraph) -> str:
    """One step of a script for `graph` (no newline): `keep OP` or `kernel TEMPLATE OP,OP,... NAME=VALUE ...` with
    the graph's op names, every template, and each template's parameters in order with their allowed values.

    Which ops a template may fuse, and whether every op is scheduled once, is the compiler's check, not the grammar's."""
    from drtriton_lsp.compiler.templates import TEMPLATES

    op = _any_of(node.name for node in graph.nodes)
    ops = f"{op}(,{op})*"
    kernels = []
    for name, template in TEMPLATES.items():
        parameters = "".join(
            f" {_literal(spec.name)}={_any_of(spec.render(value) for value in spec.values)}"
            for spec in template.parameters
        )
        kernels.append(f"{_literal(name)} {ops}{parameters}")
    return f"(keep {op}|kernel ({'|'.join(kernels)}))"


def answer_pattern(line_pattern: str) -> str:
    """A whole answer: one or more steps (`line_pattern`), each ending in a newline, then the end line (its newline
    optional, as a server stops at the end line). What an OpenAI-compatible server's structured outputs get."""
    return f"({line_pattern}\n)+{_literal(END_LINE)}\n?"


class ScriptGrammar:
    """Decides, while an answer is sampled, whether a piece of text may come next: every finished line must be a
    step (or the end line, after at least one step) and the unfinished line must still be able to become one.
    The text sampled so far was allowed piece by piece, so only the lines the new piece touches are matched.
    Beyond the pattern (which no regular expression can say), a kernel line never names an op twice."""

    def __init__(self, line_pattern: str):
        import regex  # the `regex` module matches partial text; transformers depends on it, and only samplers use this

        self._step = regex.compile(line_pattern)

    def allows(self, text: str, piece: str) -> bool:
        """Whether `text + piece` is the start of an answer (`text`: what the answer holds so far, itself allowed)."""
        steps = text.count("\n")
        *finished, open_line = (text.rpartition("\n")[2] + piece).split("\n")
        for number, line in enumerate(finished):
            if line == END_LINE and steps > 0:
                return number == len(finished) - 1 and open_line == ""
            if self._step.fullmatch(line) is None or _repeats_an_op(line):
                return False
            steps += 1
        if steps > 0 and END_LINE.startswith(open_line):
            return True
        return self._step.fullmatch(open_line, partial=True) is not None and not _repeats_an_op(open_line)

    @staticmethod
    def finished(text: str) -> bool:
        """Whether an allowed `text` is a whole answer (steps, then the end line): only then may sampling end."""
        return "\n" in text and text.rstrip("\n").endswith("\n" + END_LINE)


def _repeats_an_op(line: str) -> bool:
    """Whether a (possibly unfinished) kernel line names one op twice among the ops it has finished naming."""
    words = line.split(" ")
    if len(words) < 3 or words[0] != "kernel":
        return False
    names = words[2].split(",")
    named = names if len(words) > 3 else names[:-1]
    return len(set(named)) != len(named)


def _literal(text: str) -> str:
    return "".join("\\" + character if character in REGEX_SPECIAL else character for character in text)


def _any_of(words: Iterable[str]) -> str:
    unique = list(dict.fromkeys(words))
    return "(" + "|".join(_literal(word) for word in unique) + ")"
