"""Schedule scripts: every lowering choice for one graph as compact text that reads back losslessly.

One step per line, in the order the hybrid forward runs them; ops are the graph's node names:

    kernel <template> <op>,<op>,... <parameter>=<value> ...   (the template's parameters, all, in order)
    keep <op>                                                  (the op stays a PyTorch call)
    keep <op> layout=channels_last                             (a kept 2-d convolution, on a channels-last input)
    replay cuda_graph                                          (last line, optional: on CUDA the written-back
                                                                forward replays one CUDA graph per kind of call)

Views, tuple reads and shape arithmetic are not listed: they run where the forward first needs them.
Parsing accepts only the canonical spelling, so `print_schedule(parse_schedule(text)) == text`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from drtriton_lsp.compiler.errors import ScheduleError
from drtriton_lsp.compiler.templates import TEMPLATES

NODE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")


@dataclass(frozen=True)
class KernelLine:
    """`kernel TEMPLATE NODES PARAMS`: the nodes (graph order) fused into one kernel of the template."""

    template: str
    nodes: tuple[str, ...]
    params: tuple[tuple[str, Any], ...]  # (name, parsed value), in the template's declared order

    @property
    def parameters(self) -> dict[str, Any]:
        return dict(self.params)

    def render(self) -> str:
        specs = {spec.name: spec for spec in TEMPLATES[self.template].parameters}
        words = ["kernel", self.template, ",".join(self.nodes)]
        words += [f"{name}={specs[name].render(value)}" for name, value in self.params]
        return " ".join(words)


# memory layouts a kept op may be given: channels_last runs a 2-d convolution on a channels-last copy of its input
KEEP_LAYOUTS = ("channels_last",)


@dataclass(frozen=True)
class KeepLine:
    """`keep NODE [layout=L]`: the op runs as the same PyTorch call as in the graph (layout: on its input so laid out)."""

    node: str
    layout: str | None = None

    def render(self) -> str:
        return f"keep {self.node}" + (f" layout={self.layout}" if self.layout else "")


# how the written-back forward may run its steps: cuda_graph replays them as one CUDA graph (the dispatch's)
REPLAY_MODES = ("cuda_graph",)
REPLAY_LINE = "replay cuda_graph"


@dataclass(frozen=True)
class Schedule:
    """A parsed script: its steps in run order; replay: the `replay cuda_graph` line ends it."""

    steps: tuple[KernelLine | KeepLine, ...]
    replay: bool = False

    @property
    def kernels(self) -> tuple[KernelLine, ...]:
        return tuple(step for step in self.steps if isinstance(step, KernelLine))


def print_schedule(schedule: Schedule) -> str:
    """The script text: one line per step, each ending in a newline."""
    return "".join(step.render() + "\n" for step in schedule.steps) + (REPLAY_LINE + "\n" if schedule.replay else "")


def parse_schedule(text: str) -> Schedule:
    """Parse a script (syntax and parameter values; `lower_schedule` checks it against a graph)."""
    if text and not text.endswith("\n"):
        raise ScheduleError(
            f"line {text.count(chr(10)) + 1}: the script must end with a newline",
            "every step is one line ending in '\\n'",
        )
    lines = text.splitlines()
    replay = bool(lines) and lines[-1].startswith("replay")
    if replay:
        if lines[-1] != REPLAY_LINE:
            raise ScheduleError(
                f"line {len(lines)}: expected {REPLAY_LINE!r}, got {lines[-1]!r}", f"replay modes: {', '.join(REPLAY_MODES)}"
            )
        lines = lines[:-1]
    steps: list[KernelLine | KeepLine] = []
    for number, line in enumerate(lines, start=1):
        steps.append(_parse_line(number, line))
    return Schedule(tuple(steps), replay)


def _parse_line(number: int, line: str) -> KernelLine | KeepLine:
    def fail(problem: str, hint: str) -> ScheduleError:
        return ScheduleError(f"line {number}: {problem}", hint)

    words = line.split(" ")
    if "" in words or line != line.strip():
        raise fail("steps are words separated by single spaces", "remove extra or trailing spaces and blank lines")
    if words[0] == "keep":
        if len(words) not in (2, 3) or not NODE_NAME.match(words[1]):
            raise fail(f"expected 'keep <op>' or 'keep <op> layout=<layout>', got {line!r}", "name exactly one graph op")
        if len(words) == 2:
            return KeepLine(words[1])
        name, _, layout = words[2].partition("=")
        if name != "layout" or layout not in KEEP_LAYOUTS:
            raise fail(f"a keep line takes only layout=<layout>, got {words[2]!r}", f"layouts: {', '.join(KEEP_LAYOUTS)}")
        return KeepLine(words[1], layout)
    if words[0] == "replay":
        raise fail(f"{REPLAY_LINE!r} can only be the last line", "move it to the end of the script")
    if words[0] != "kernel":
        raise fail(f"a step starts with 'kernel' or 'keep', not {words[0]!r}", "see the script grammar in docs/COMPILER.md")
    if len(words) < 3:
        raise fail("expected 'kernel <template> <op>,<op>,... <parameter>=<value> ...'", "name a template and its ops")
    template_name, node_list, assignments = words[1], words[2], words[3:]
    template = TEMPLATES.get(template_name)
    if template is None:
        known = "; ".join(f"{name} ({known.summary})" for name, known in TEMPLATES.items())
        raise fail(f"unknown template {template_name!r}", f"templates: {known}")
    nodes = tuple(node_list.split(","))
    for node in nodes:
        if not NODE_NAME.match(node):
            raise fail(f"{node!r} is not an op name", "ops are graph node names joined by commas, no spaces")
    if len(set(nodes)) != len(nodes):
        raise fail("an op is listed twice in one kernel", "list each op once")
    expected = [spec.name for spec in template.parameters]
    given = [assignment.partition("=")[0] for assignment in assignments]
    if given != expected:
        raise fail(
            f"kernel {template_name} takes parameters {' '.join(expected) or '(none)'}, in that order; "
            f"got {' '.join(given) or '(none)'}",
            "give every parameter of the template exactly once, in its declared order",
        )
    params: list[tuple[str, Any]] = []
    for spec, assignment in zip(template.parameters, assignments):
        text = assignment.partition("=")[2]
        try:
            params.append((spec.name, spec.parse(text)))
        except ValueError as error:
            raise fail(f"kernel {template_name}, parameter {spec.name}: {error}", spec.doc) from None
    return KernelLine(template_name, nodes, tuple(params))
