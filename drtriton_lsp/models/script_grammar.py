"""The schedule-script grammar for one graph: what a script writer's sampling is held to, as it is sampled.

A server that supports vLLM's structured outputs gets `answer_pattern` (a regular expression); the transformers backend
checks each next token with `ScriptGrammar`, which also holds each op to one place. Imports no torch.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Iterable, Sequence

from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.compiler.partition import broadcast_domain, broadcasts_to
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
    row kernel at least one reduction. Empty tuples: no template rule (any op in any kernel).

    `shapes` (None: no shape rule) says which ops one kernel may hold together, as the planner checks a kernel line:
    a pointwise kernel's ops share one output shape, an anchored kernel's prologue and epilogue fit its anchor."""

    line: str
    ops: tuple[str, ...]
    reads: tuple[tuple[str, ...], ...] = ()
    templates: tuple[tuple[str, ...], ...] = ()
    anchors: tuple[str, ...] = ()
    shapes: "KernelShapes | None" = None

    def to_json(self) -> dict[str, Any]:
        return {"line": self.line, "ops": list(self.ops), "reads": [list(read) for read in self.reads],
                "templates": [list(names) for names in self.templates], "anchors": list(self.anchors),
                "shapes": self.shapes.to_json() if self.shapes is not None else None}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "ScriptConstraint":
        shapes = data.get("shapes")
        return cls(data["line"], tuple(data["ops"]), tuple(tuple(read) for read in data.get("reads", [])),
                   tuple(tuple(names) for names in data.get("templates", [])), tuple(data.get("anchors", [])),
                   KernelShapes.from_json(shapes) if shapes is not None else None)


@dataclass(frozen=True)
class KernelShapes:
    """Per op of a `ScriptConstraint` (same order), what the planner needs to decide which ops share a kernel.

    domains[i]: the shape an elementwise `ops[i]` computes (as text; "" for any other op); view_reads[i]: the ops it reads through a view or shape
    arithmetic (those run before the kernel, so the value they read cannot come from the same kernel); readers[i]:
    every node that reads it (views included). For an op a template anchors: primary_inputs[i], the value its
    prologue may compute ("" for none), input_domains[i], that value's shape, and output_domains[i], the shape its
    epilogue runs over ("" for no epilogue); "" for every other op. row_shapes[i]: for a reduction a row kernel
    can fold, the shapes a row kernel built on it computes (its rows, and one value per row with and without the
    reduced dims); empty for every other op. read_in_place[i]: whether `ops[i]` is an embedding lookup or a reshape that
    a kernel reads where it needs it and never stores, so only ops of its own kernel may read it."""

    domains: tuple[str, ...]
    view_reads: tuple[tuple[str, ...], ...]
    readers: tuple[tuple[str, ...], ...]
    primary_inputs: tuple[str, ...]
    input_domains: tuple[str, ...]
    output_domains: tuple[str, ...]
    row_shapes: tuple[tuple[str, ...], ...]
    read_in_place: tuple[bool, ...]

    def to_json(self) -> dict[str, Any]:
        return {name: [list(value) if isinstance(value, tuple) else value for value in getattr(self, name)]
                for name in self.__dataclass_fields__}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "KernelShapes":
        return cls(**{name: tuple(tuple(value) if isinstance(value, list) else value for value in data[name])
                      for name in cls.__dataclass_fields__})


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

    def view_read_ops(name: str) -> set[str]:
        found: set[str] = set()
        for ref in nodes[name].input_refs():
            if ref in nodes and ref not in ops:
                found |= read_ops(ref, {ref})
        return found

    reads = tuple(tuple(sorted(read_ops(op, set()), key=ops.index)) for op in ops)
    view_reads = tuple(tuple(sorted(view_read_ops(op), key=ops.index)) for op in ops)
    templates, anchors = kernel_templates(graph, ops)
    return ScriptConstraint(
        script_line_pattern(ops, templates), ops, reads, templates, anchors, kernel_shapes(graph, ops, view_reads)
    )


def kernel_shapes(graph: OpGraph, ops: Sequence[str], view_reads: tuple[tuple[str, ...], ...]) -> KernelShapes:
    """The `KernelShapes` of `ops`, from the planner's roles: a pointwise op's domain, an anchored op's prologue
    input and input and output domains, a reduction's row shapes."""
    from drtriton_lsp.compiler.gather import GATHER_OPS
    from drtriton_lsp.compiler.partition import Anchored, Pointwise
    from drtriton_lsp.compiler.reshape_reads import RESHAPE_OPS
    from drtriton_lsp.compiler.planner import classify, live_readers
    from drtriton_lsp.compiler.templates.fold import reduced_shape
    from drtriton_lsp.compiler.templates.row import RowGroupError, row_group

    roles = classify(graph)
    readers = live_readers(graph, roles)
    op_of = {node.name: node.op for node in graph.nodes}
    domains, primary_inputs, input_domains, output_domains, row_shapes = [], [], [], [], []
    for op in ops:
        role = roles.roles.get(op)
        domains.append(_shape_text(role.domain) if isinstance(role, Pointwise) else "")
        anchored = isinstance(role, Anchored)
        primary_inputs.append(role.primary_input or "" if anchored else "")
        input_domains.append(_shape_text(role.input_domain) if anchored else "")
        output_domains.append(_shape_text(role.output_domain) if anchored and role.output_domain is not None else "")
        try:
            group = row_group(graph, (op,)) if anchored and role.template == REDUCE_TEMPLATE else None
        except RowGroupError:
            group = None
        row_shapes.append(() if group is None else tuple(_shape_text(shape) for shape in (
            group.domain, reduced_shape(group.domain, group.column_dims, True),
            reduced_shape(group.domain, group.column_dims, False))))
    return KernelShapes(
        tuple(domains), view_reads, tuple(tuple(readers.get(op, ())) for op in ops),
        tuple(primary_inputs), tuple(input_domains), tuple(output_domains), tuple(row_shapes),
        tuple(isinstance(roles.roles.get(op), Pointwise) and op_of[op] in GATHER_OPS + RESHAPE_OPS for op in ops),
    )


def _shape_text(shape: Iterable[Any]) -> str:
    """A shape as text that two equal shapes share (symbolic sizes included), never empty: a JSON list of its sizes'
    texts (whole numbers as numbers), which `_shape_of` reads back."""
    return json.dumps([size if isinstance(size, int) else str(size) for size in shape])


def _shape_of(text: str) -> tuple[Any, ...] | None:
    """The shape a `_shape_text` holds (None for "", no shape)."""
    return tuple(json.loads(text)) if text else None


def kernel_templates(graph: OpGraph, ops: Sequence[str]) -> tuple[tuple[tuple[str, ...], ...], tuple[str, ...]]:
    """Per op, the templates whose kernel may hold it and the template it anchors, as the compiler's planner decides:
    an elementwise op goes in any kernel, an embedding lookup or a reshape in a kernel that reads it in place; an
    anchored op in its own template's kernel (a reduction also in a row kernel where it folds a row's trailing dims,
    or folded at the end of a template that reduces its output); an op no template computes is kept."""
    from drtriton_lsp.compiler.gather import GATHER_OPS
    from drtriton_lsp.compiler.partition import Anchored, Pointwise
    from drtriton_lsp.compiler.reshape_reads import RESHAPE_OPS
    from drtriton_lsp.compiler.planner import classify
    from drtriton_lsp.compiler.templates import TEMPLATES
    from drtriton_lsp.compiler.templates.row import RowGroupError, row_group

    roles = classify(graph).roles
    op_of = {node.name: node.op for node in graph.nodes}
    folding = [name for name, template in TEMPLATES.items() if template.reduces_output]
    templates, anchors = [], []
    for op in ops:
        role = roles.get(op)
        if isinstance(role, Pointwise):
            # a read member (an embedding lookup, a reshape) goes in a kernel that reads it in place
            readers = tuple(name for name, template in TEMPLATES.items() if op_of[op] in template.read_member_ops)
            templates.append(readers if op_of[op] in GATHER_OPS + RESHAPE_OPS else tuple(TEMPLATES))
            anchors.append("")
        elif isinstance(role, Anchored):
            extra = [name for name in folding if not _fold_problem(graph, name, op)] if role.template == REDUCE_TEMPLATE else []
            try:
                if role.template == REDUCE_TEMPLATE and row_group(graph, (op,)):
                    extra.append(ROW_TEMPLATE)
            except RowGroupError:
                pass  # no row kernel folds it (not the trailing dims, or it returns indices)
            templates.append(tuple(name for name in TEMPLATES if name == role.template or name in extra))
            anchors.append(role.template)
        else:
            templates.append(())
            anchors.append("")
    return tuple(templates), tuple(anchors)


def _fold_problem(graph: OpGraph, template_name: str, reduction: str) -> str:
    """Why a kernel of `template_name` (one that reduces its output) cannot fold `reduction` whatever its tile ("" if
    it can): the template's own check, on a kernel of the reduction alone."""
    from drtriton_lsp.compiler.templates import TEMPLATES
    from drtriton_lsp.compiler.templates.base import KernelPlan

    plan = KernelPlan(template_name, "", "", (reduction,), (), None, (), (), (), (), (), {}, reduction)
    return TEMPLATES[template_name].reduction_problem(plan, graph)


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
        self._shapes = constraint.shapes
        self._ancestor_sets: dict[str, frozenset[str]] = {}
        if constraint.shapes is not None:
            shapes = constraint.shapes
            self._domain = dict(zip(constraint.ops, shapes.domains))
            self._view_reads = dict(zip(constraint.ops, (frozenset(read) for read in shapes.view_reads)))
            self._readers = dict(zip(constraint.ops, shapes.readers))
            self._primary_input = dict(zip(constraint.ops, shapes.primary_inputs))
            self._input_domain = dict(zip(constraint.ops, shapes.input_domains))
            # the same shapes read back once, for the broadcast rules (asked at every sampled token)
            self._domain_shape = {op: _shape_of(text) for op, text in self._domain.items()}
            self._input_shape = {op: _shape_of(text) for op, text in self._input_domain.items()}
            self._output_domain = dict(zip(constraint.ops, shapes.output_domains))
            self._row_shapes = dict(zip(constraint.ops, shapes.row_shapes))
            self._read_in_place = dict(zip(constraint.ops, shapes.read_in_place))
        self._last: tuple[str, frozenset[str], str] = ("", frozenset(), "")

    def allows(self, text: str, piece: str) -> bool:
        """Whether `text + piece` is the start of an answer (`text`: what the answer holds so far, itself allowed)."""
        if self.finished(text):
            # the end line ends the answer: only its newline may follow (a sampler without a stop string that allowed
            # more would write end lines until its token limit, each token through this check)
            return piece == "\n" and not text.endswith("\n")
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
            return self._shapes_fit(template, ops, closed, placed)
        centres = sum(self._anchors[op] == centre for op in ops)
        folded = sum(self._anchors[op] == REDUCE_TEMPLATE for op in ops) if centre != REDUCE_TEMPLATE else 0
        if template != ROW_TEMPLATE and (centres > 1 or folded > 1):
            return False
        if not centres:
            return not closed and self._kernel_can_hold(template, placed, ops)
        return self._shapes_fit(template, ops, closed, placed)

    def _shapes_fit(
        self, template: str, ops: list[str], closed: bool, placed: set[str], anchor: str | None = None,
    ) -> bool:
        """Whether one kernel of `template` may hold `ops` together as the planner sees a kernel line (its op list
        `closed`, or still growing: then only what later ops cannot mend counts; `anchor`: an op still to come that
        the kernel is to be built around, all of `ops` coming before it): no op reads another of the kernel through
        a view; a pointwise kernel's ops share one shape; an anchored kernel's ops that its anchor reads are its
        prologue, which its template must take, all in the shape of the anchor's primary input (which is among them)
        and read by nothing outside the kernel; the others are its epilogue, in the anchor's output shape, but for
        a reduction folded at the end (in the shape it reduces to, and reading no unreduced value).

        An op of the kernel that the anchor reads through other ops is in its prologue whatever else the kernel
        holds: the ops between read a value of this kernel, so they can only be in it too."""
        if self._shapes is None:
            return True
        members = set(ops)
        if any(self._view_reads[op] & members for op in ops):
            return False
        if template == POINTWISE_TEMPLATE:
            return self._pointwise_fits(ops, closed, placed)
        centre = _centre(template)
        if template == ROW_TEMPLATE:
            reductions = [op for op in ops if self._anchors[op] == REDUCE_TEMPLATE]
            shapes = self._row_shapes[anchor if anchor is not None else reductions[0]]
            return all(self._row_shapes[op] == shapes for op in reductions) and all(
                self._domain[op] in shapes for op in ops if self._anchors[op] == "")
        if anchor is None:
            anchor = next(op for op in ops if self._anchors[op] == centre)
        elif self._view_reads[anchor] & members:
            return False
        reduction = next((op for op in ops if self._anchors[op] == REDUCE_TEMPLATE and op != anchor), None)
        if reduction is not None and self._position[reduction] < self._position[anchor]:
            return False
        ancestors = self._ancestors(anchor)
        reduced = {reduction} if reduction is not None else set()
        for op in ops:
            if self._reads[op] & reduced:
                reduced.add(op)
        prologue = [op for op in ops if op in ancestors]
        epilogue = [op for op in ops if op != anchor and op not in ancestors and op not in reduced]
        last = max(self._position[op] for op in ops)
        primary = self._primary_input[anchor]
        primary_to_come = primary in self._position and last < self._position[primary] < self._position[anchor]
        if prologue and primary not in prologue and not primary_to_come:
            return False
        for op in prologue:
            in_shape = (self._domain[op] == self._input_domain[anchor] if op == primary
                        else broadcasts_to(self._domain_shape[op], self._input_shape[anchor]))
            if not in_shape or (anchor in self._readers[op] and op != primary):
                return False
            outside = [reader for reader in self._readers[op] if reader not in members and reader != anchor]
            if outside and (closed or not all(self._may_join_epilogue(reader, anchor, template, last) for reader in outside)):
                return False
        output = self._output_domain[anchor]
        if any(self._domain[op] != output or not output for op in epilogue):
            return False
        for op in epilogue:
            outside = [reader for reader in self._readers[op] if reader not in members]
            if self._read_in_place[op] and outside and (
                    closed or not all(self._may_join_epilogue(reader, anchor, template, last) for reader in outside)):
                return False
        if reduction is None:
            return True
        tile = {anchor, *epilogue}
        return (
            self._primary_input[reduction] in tile and self._input_domain[reduction] == output
            and all(self._domain[op] == self._output_domain[reduction] and not self._reads[op] & tile
                    for op in reduced - {reduction})
        )

    def _pointwise_fits(self, ops: list[str], closed: bool, placed: set[str]) -> bool:
        """Whether a pointwise kernel may hold `ops` (planner._pointwise_domain): it runs over one of their shapes that
        every other broadcasts to, and an op of a smaller shape, computed for each element, or read in place (never
        stored) is read by nothing outside the kernel (while the list grows, only by later ops that may still join it
        after `placed`)."""
        if not ops:
            return True
        domain = broadcast_domain({self._domain_shape[op] for op in ops})
        if domain is None:
            return False
        members = set(ops)
        for op in ops:
            outside = [reader for reader in self._readers[op] if reader not in members]
            if (self._domain_shape[op] != domain or self._read_in_place[op]) and outside and (
                    closed or not all(self._may_join_pointwise(reader, ops, placed) for reader in outside)):
                return False
        return True

    def _may_join_pointwise(self, op: str, ops: list[str], placed: set[str]) -> bool:
        """Whether `op` may still be listed in a pointwise kernel listing `ops` so far, after `placed`: it and each
        op it reads that is neither placed nor listed come later, are elementwise, and read no value through a view
        that is not placed yet."""
        last = max(self._position[member] for member in ops)
        needed = {op, *(self._ancestors(op) - placed - set(ops))} if op in self._position else {op}
        return all(
            read in self._position and self._position[read] > last and self._anchors[read] == ""
            and POINTWISE_TEMPLATE in self._templates[read] and self._view_reads[read] <= placed
            for read in needed
        )

    def _may_join_epilogue(self, op: str, anchor: str, template: str, last: int) -> bool:
        """Whether `op` (not a view) may still be listed in the epilogue of a kernel built around `anchor` whose
        listed ops end at position `last`."""
        return (
            op in self._position and self._position[op] > last and self._anchors[op] == ""
            and template in self._templates[op] and self._domain[op] == self._output_domain[anchor] != ""
        )

    def _ancestors(self, op: str) -> frozenset[str]:
        """The ops `op` reads, directly or through other ops (remembered: asked for at many tokens)."""
        if op not in self._ancestor_sets:
            found: set[str] = set()
            for read in self._reads[op]:
                found |= {read, *self._ancestors(read)}
            self._ancestor_sets[op] = frozenset(found)
        return self._ancestor_sets[op]

    def _kernel_can_hold(self, template: str, placed: set[str], ops: list[str]) -> bool:
        """Whether a kernel of `template` that holds `ops` so far can still hold what it needs: its centre op (for a
        pointwise kernel, any op), with every op it reads that no earlier step placed (those can only come in this
        kernel, before it), each an elementwise op the template holds, all fitting by shape."""
        centre = _centre(template)
        if centre is not None and any(self._anchors[op] == centre for op in ops):
            return True
        if centre is None and ops:
            return True
        last = max((self._position[op] for op in ops), default=-1)
        for op in self._order[last + 1:]:
            if op in placed or template not in self._templates[op] or (centre is not None and self._anchors[op] != centre):
                continue
            needed = self._ancestors(op) - placed - set(ops)
            if any(self._position[read] <= last or self._anchors[read] != "" or template not in self._templates[read]
                   for read in needed):
                continue
            before = sorted({*ops, *needed}, key=self._position.__getitem__)
            if self._shapes is not None and any(not self._view_reads[read] <= placed for read in (*needed, op)):
                continue
            if centre is None and self._shapes_fit(template, [*before, op], False, placed):
                return True
            if centre is not None and (not before or self._shapes_fit(template, before, False, placed, anchor=op)):
                return True
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
