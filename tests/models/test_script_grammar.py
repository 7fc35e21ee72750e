"""The script grammar that holds a script writer's sampling: every script the compiler and the search write is in it,
everything in it parses, the planner refuses a script sampled in it only for what the grammar cannot know, and the
token-by-token check agrees with the whole-answer pattern a server gets.

Graphs are two captured CSP-DAG level-5 programs (tests/fixtures/csp_dag_level5_graphs.json) and 61 CSP-DAG training
programs of levels 1, 2, 5 and 20 (synthesis seed 18, with their sources; programs with no op to place left out:
tests/fixtures/csp_dag_training_graphs.json).
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from pathlib import Path

import pytest
import regex
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.fragments import UnsearchableFragment, search_steps, step_alternatives
from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.compiler.script import Schedule, parse_schedule, print_schedule
from drtriton_lsp.models import formats
from drtriton_lsp.models.script_grammar import (
    ScriptConstraint,
    ScriptGrammar,
    answer_pattern,
    script_constraint,
    script_line_pattern,
)
from drtriton_lsp.worker.capture import capture_graph

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "csp_dag_level5_graphs.json"
GRAPHS = [OpGraph.from_json(data) for data in json.loads(FIXTURE.read_text())]
IDS = ["pool-conv-var", "norm-conv-bmm"]
TRAINING_FIXTURE = FIXTURE.parent / "csp_dag_training_graphs.json"
TRAINING = [(record["level"], record["hash"], OpGraph.from_json(record["graph"]))
            for record in json.loads(TRAINING_FIXTURE.read_text())]
TRAINING_GRAPHS = [graph for _level, _hash, graph in TRAINING]
TRAINING_IDS = [f"level{level}-{program}" for level, program, _graph in TRAINING]


def default_script(graph: OpGraph) -> str:
    params = [graph_input.target for graph_input in graph.inputs if graph_input.kind == "user_input"]
    return compile_graph(graph, prefix="model", forward_params=params, has_self=True).schedule


def accepted_piece_by_piece(grammar: ScriptGrammar, text: str, size: int = 1) -> bool:
    """Whether sampling `text` in pieces of `size` characters keeps every prefix allowed."""
    return all(grammar.allows(text[:start], text[start:start + size]) for start in range(0, len(text), size))


def search_scripts(graph: OpGraph, base: Schedule) -> list[str]:
    """Every whole script the search measures: the default with one step replaced by each of its alternatives."""
    scripts = []
    for step in search_steps(graph, base):
        try:
            alternatives = [chosen for _label, chosen in step_alternatives(graph, step)]
        except UnsearchableFragment:
            continue
        for chosen in alternatives:
            steps = [line for number, line in enumerate(base.steps) if number not in step.positions[:-1]]
            place = step.positions[-1] - len(step.positions) + 1
            steps[place:place + 1] = chosen
            scripts.append(print_schedule(Schedule(tuple(steps))))
    return scripts


@pytest.mark.parametrize("graph", GRAPHS + TRAINING_GRAPHS, ids=IDS + TRAINING_IDS)
def test_every_script_the_compiler_and_the_search_write_is_in_the_grammar(graph):
    constraint = script_constraint(graph)
    grammar = ScriptGrammar(constraint)
    base = parse_schedule(default_script(graph))
    searched = search_scripts(graph, base)
    for script in [default_script(graph), *searched]:
        answer = formats.script_completion(script)
        assert re.fullmatch(answer_pattern(constraint.line), answer), answer
        assert grammar.allows("", answer), answer
    if graph in GRAPHS:  # the search's alternatives are in, not only the default
        assert len(searched) > len(base.steps)
    answer = formats.script_completion(default_script(graph))
    assert accepted_piece_by_piece(grammar, answer) and accepted_piece_by_piece(grammar, answer, size=7)
    assert grammar.finished(answer) and not grammar.finished(answer[: answer.index(formats.END_LINE)])


# What the planner may refuse in a script sampled in the grammar: choices that only a whole plan shows, which the
# grammar does not model. Any other refusal means the grammar offered what the planner refuses (issue #18 found a
# held `kernel copy` line with a prologue): teach the grammar the rule (script_grammar.KernelShapes).
BEYOND_THE_GRAMMAR = (
    "a depthwise convolution multiplies in float32 without tl.dot",  # one op's kernel refuses a parameter value
    "loads=descriptors: the product has",  # a batched or one-row product refuses descriptor loads
    "which the prologue computes per window position",  # a pool epilogue reading a prologue value
    "which holds one value per row", "broadcasts along the rows", "is not in the same per-row shape",  # row passes
    "more than the tile's N",  # a matmul kernel's tile too narrow for the rows it folds
)


def sampled_answer(grammar: ScriptGrammar, rng: random.Random) -> str:
    """An answer written one character at a time, each chosen at random among those the grammar allows next."""
    text = ""
    while not grammar.finished(text):
        allowed = [character for character in ALPHABET if grammar.allows(text, character)]
        assert allowed, f"a dead end after {text!r}"
        text += rng.choice(allowed)
    return text


@pytest.mark.parametrize("graph", TRAINING_GRAPHS, ids=TRAINING_IDS)
def test_the_planner_refuses_a_script_sampled_in_the_grammar_only_for_what_the_grammar_cannot_know(graph):
    grammar = ScriptGrammar(script_constraint(graph))
    for walk in range(3):
        answer = sampled_answer(grammar, random.Random(f"{graph.nodes[0].name}:{len(graph.nodes)}:{walk}"))
        problem = formats.parse_script_answer(answer, graph).error
        assert not problem or any(reason in problem for reason in BEYOND_THE_GRAMMAR), (problem, answer)


def training_graph(program: str) -> OpGraph:
    return next(graph for _level, name, graph in TRAINING if name == program)


NORMALIZE = "kernel normalize instance_norm,abs_1,add,div strategy=single rows=1 warps=1\n"


@pytest.mark.parametrize(
    "program, answer, planner_says",
    [
        # maximum -> stack: a copy kernel reads its inputs as they are stored (issue #18's held `kernel copy` line)
        ("c20d11dd768a19e10a89", f"kernel copy maximum,stack block=1024 warps=4\n{NORMALIZE}", "takes no prologue"),
        # maximum computes a 0-d tensor, which broadcasts to abs_1's [s17, 1, s48]: computed for each of its elements,
        # it cannot be stored for stack to read
        ("c20d11dd768a19e10a89", "keep instance_norm\nkernel pointwise maximum,abs_1 block=1024 warps=4\nkeep add\n"
         "keep div\nkeep stack\n", "is read by stack outside it"),
        # log_sigmoid's [1, 3] does not broadcast to add's [s17, 3, s59, s38]
        ("f93887a5ffa4ab97cf50", "".join(f"keep {op}\n" for op in (
            "sum_1", "sign", "detach", "soft_margin_loss", "cross_entropy_loss", "silu", "mean", "max_pool2d"))
         + "kernel pointwise log_sigmoid,add,hardsigmoid block=1024 warps=4\n" + "".join(f"keep {op}\n" for op in (
            "add_1", "selu", "square", "cat", "abs_1", "adaptive_max_pool2d", "add_2", "rms_norm", "add_3")),
         "do not broadcast to one"),
        # maximum does not feed instance_norm, so it would be its epilogue, in another shape
        ("c20d11dd768a19e10a89", "kernel normalize maximum,instance_norm,abs_1,add,div strategy=single rows=1 "
         "warps=1\nkeep stack\n", "not in the anchor's output shape"),
        # add_1 reads log_sigmoid through a slice, which runs before the kernel
        ("f93887a5ffa4ab97cf50", "".join(f"keep {op}\n" for op in (
            "sum_1", "sign", "detach", "soft_margin_loss", "cross_entropy_loss", "silu", "mean", "max_pool2d"))
         + "kernel pointwise log_sigmoid,add_1 block=1024 warps=4\n" + "".join(f"keep {op}\n" for op in (
            "add", "hardsigmoid", "selu", "square", "cat", "abs_1", "adaptive_max_pool2d", "add_2", "rms_norm",
            "add_3")),
         "which no earlier line computes"),
    ],
)
def test_a_kernel_the_planner_refuses_for_its_template_or_shapes_is_out_of_the_grammar(program, answer, planner_says):
    """Each is in the line pattern (a server's) and placed the way the placement rules ask, yet the planner refuses
    it: the token check refuses it too, at the op where it goes wrong."""
    graph = training_graph(program)
    constraint = script_constraint(graph)
    answer += formats.END_LINE + "\n"
    assert re.fullmatch(answer_pattern(constraint.line), answer)
    assert accepted_piece_by_piece(ScriptGrammar(dataclasses.replace(constraint, shapes=None)), answer)
    assert planner_says in formats.parse_script_answer(answer, graph).error
    assert not accepted_piece_by_piece(ScriptGrammar(constraint), answer)
    default = formats.script_completion(default_script(graph))
    assert accepted_piece_by_piece(ScriptGrammar(constraint), default)


def test_a_reshape_read_in_place_is_listed_only_with_every_op_that_reads_it():
    class MergedTwice(torch.nn.Module):
        def forward(self, x, y):
            merged = x.transpose(0, 1).reshape(x.shape[1], -1)
            return merged.sigmoid(), merged.abs() + y

    graph = capture_graph(MergedTwice(), (torch.randn(4, 6, 3), torch.randn(6, 12)))
    constraint = script_constraint(graph)
    grammar = ScriptGrammar(constraint)
    split = "kernel pointwise reshape,sigmoid block=1024 warps=4\nkernel pointwise abs_1,add block=1024 warps=4\n"
    split += formats.END_LINE + "\n"
    assert "read outside the kernel" in formats.parse_script_answer(split, graph).error
    assert not accepted_piece_by_piece(grammar, split)
    together = "kernel pointwise reshape,sigmoid,abs_1,add block=1024 warps=4\n" + formats.END_LINE + "\n"
    assert formats.parse_script_answer(together, graph).valid
    assert accepted_piece_by_piece(grammar, together)


def test_the_constraint_with_its_kernel_shapes_reads_back_from_json():
    constraint = script_constraint(training_graph("c20d11dd768a19e10a89"))
    assert constraint.shapes is not None
    assert ScriptConstraint.from_json(json.loads(json.dumps(constraint.to_json()))) == constraint


# What the compiler says of ops placed twice, not at all, out of order, or in a template that cannot compute them (or
# a kernel without the op its template is built around): never said of a held answer.
PLACEMENT_ERRORS = (
    "the graph has no op", "already scheduled", "ops not scheduled", "listed twice", "never scheduled",
    "which no earlier line computes", "in graph order", "cannot be computed by this template", "is not elementwise",
    "needs exactly one", "is neither elementwise nor a reduction",
)


def without_templates(constraint: ScriptConstraint) -> ScriptConstraint:
    """The same placement rules with any op allowed in any kernel: for tests of placement alone."""
    return ScriptConstraint(script_line_pattern(constraint.ops), constraint.ops, constraint.reads)


@pytest.mark.parametrize("graph", GRAPHS, ids=IDS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_an_answer_in_the_grammar_parses_and_the_token_check_accepts_it_when_it_places_ops_rightly(graph, data):
    constraint = script_constraint(graph)
    answer = data.draw(st.from_regex(answer_pattern(constraint.line), fullmatch=True))
    placed_rightly = accepted_piece_by_piece(ScriptGrammar(dataclasses.replace(constraint, shapes=None)), answer)
    assert placed_rightly == follows_the_placement_rules(answer, constraint)
    accepted = accepted_piece_by_piece(ScriptGrammar(constraint), answer)
    parsed = formats.parse_script_answer(answer, graph)
    assert parsed.script is not None or "listed twice" in parsed.error  # the syntax always parses
    assert placed_rightly or not accepted
    if accepted:
        assert not any(error in parsed.error for error in PLACEMENT_ERRORS), parsed.error
    if parsed.valid:
        assert accepted, answer  # the grammar holds back nothing the planner takes


@pytest.mark.parametrize(
    "answer",
    [
        "kernel pointwise nosuchop block=256 warps=4\n### end\n",  # an op the graph does not have
        "kernel nosuchtemplate {op} block=256\n### end\n",
        "kernel pointwise {op} warps=4 block=256\n### end\n",  # parameters out of order
        "kernel pointwise {op} block=300 warps=4\n### end\n",  # a value the template does not allow
        "kernel pointwise {op}  block=256 warps=4\n### end\n",  # two spaces
        "keep {op}\nkeep {op} extra\n### end\n",
        "### end\n",  # no step at all
        "{all}### end and more",
    ],
)
def test_what_the_parser_refuses_the_grammar_refuses_piece_by_piece(answer):
    graph = GRAPHS[0]
    constraint = without_templates(script_constraint(graph))
    text = answer.format(op=constraint.ops[0], all="".join(f"keep {op}\n" for op in constraint.ops))
    assert re.fullmatch(answer_pattern(constraint.line), text) is None
    assert not accepted_piece_by_piece(ScriptGrammar(constraint), text)
    assert not ScriptGrammar(constraint).allows("", text)
    assert not formats.parse_script_answer(text, graph).valid


@pytest.mark.parametrize(
    "answer, compiler_says",
    [
        ("kernel pointwise {first},{first} block=256 warps=4\n{rest}### end\n", "listed twice"),
        ("keep {first}\n{all}### end\n", "already scheduled"),
        ("keep {first}\n### end\n", "ops not scheduled"),
        ("{reversed}### end\n", "which no earlier line computes"),  # each op before the ops it reads
        ("kernel pointwise {last},{first} block=256 warps=4\n{middle}### end\n", "in graph order"),
    ],
)
def test_placing_ops_twice_not_at_all_or_out_of_order_is_beyond_the_pattern_and_refused(answer, compiler_says):
    graph = GRAPHS[0]
    constraint = without_templates(script_constraint(graph))
    first, *rest = constraint.ops
    text = answer.format(
        first=first, last=rest[-1], rest="".join(f"keep {op}\n" for op in rest),
        all="".join(f"keep {op}\n" for op in constraint.ops),
        reversed="".join(f"keep {op}\n" for op in reversed(constraint.ops)),
        middle="".join(f"keep {op}\n" for op in rest[:-1]),
    )
    assert re.fullmatch(answer_pattern(constraint.line), text)  # a regular expression cannot count
    assert not accepted_piece_by_piece(ScriptGrammar(constraint), text)
    assert not ScriptGrammar(constraint).allows("", text)  # nor in one piece (a token may hold whole lines)
    assert compiler_says in formats.parse_script_answer(text, graph).error


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="kepnrl tiwsob=,_0123456789#d\n", max_size=40) | st.sampled_from(["keep ", "### e"]))
def test_the_token_check_agrees_with_the_pattern_and_the_placement_rules_on_any_text(text):
    graph = GRAPHS[1]
    constraint = dataclasses.replace(script_constraint(graph), shapes=None)  # the placement rules alone
    whole = regex.compile(answer_pattern(constraint.line))
    grammar = ScriptGrammar(constraint)
    for prefix in (text, "keep " + constraint.ops[0] + "\n" + text):
        expected = whole.fullmatch(prefix, partial=True) is not None and follows_the_placement_rules(prefix, constraint)
        assert accepted_piece_by_piece(grammar, prefix) == expected, prefix


def ops_of(line: str) -> list[str]:
    words = line.split(" ")
    if words[0] == "keep":
        return words[1:2]
    return words[2].split(",") if words[0] == "kernel" and len(words) > 2 else []


def follows_the_placement_rules(prefix: str, constraint) -> bool:
    """The rules as a reader states them, for any prefix of an answer: each op is named once; a kernel names its ops in
    graph order; an op is named only after every op it reads (on an earlier line, or earlier in the same kernel); a
    kernel names only ops its template can hold, and the one op its template is built around (a row kernel: at least
    one reduction; an op list still being written: one that can still come, through elementwise ops that can); the
    end line (or a start of it) comes only after every op is named, and then nothing else; and a name being written
    (an op's or a template's) can still become one that may come there."""
    position = {op: number for number, op in enumerate(constraint.ops)}
    reads = dict(zip(constraint.ops, constraint.reads))
    holds = dict(zip(constraint.ops, constraint.templates))
    anchor = dict(zip(constraint.ops, constraint.anchors))
    *finished, current = prefix.split("\n")
    if formats.END_LINE in finished:
        return finished.index(formats.END_LINE) == len(finished) - 1 and current == "" and ending_is_allowed(
            finished[:-1], constraint)
    named: list[str] = []

    def may_follow(op: str, line_names: list[str]) -> bool:
        return (
            op not in named and op not in line_names
            and all(position[op] > position[earlier] for earlier in line_names)
            and set(reads[op]) <= set(named) | set(line_names)
        )

    def centre_of(template: str) -> str | None:
        return None if template == "pointwise" else "reduce" if template == "row" else template

    def can_get_centre(template: str, line_names: list[str]) -> bool:
        centre = centre_of(template)
        if (centre is None and line_names) or (centre is not None and any(anchor[op] == centre for op in line_names)):
            return True
        def leads_to_centre(op: str) -> bool:
            return centre is None or anchor[op] == centre or (
                anchor[op] == "" and can_get_centre(template, [*line_names, op]))

        return any(may_follow(op, line_names) and template in holds[op] and leads_to_centre(op) for op in constraint.ops)

    def kernel_allows(template: str | None, line_names: list[str], closed: bool) -> bool:
        if template is None or not constraint.templates:
            return True
        if not all(template in holds[op] for op in line_names):
            return False
        centre = centre_of(template)
        if centre is None:
            return True
        centres = [op for op in line_names if anchor[op] == centre]
        reductions = [op for op in line_names if anchor[op] == "reduce"]
        if template != "row" and (len(centres) > 1 or (centre != "reduce" and len(reductions) > 1)):
            return False
        return bool(centres) or (not closed and can_get_centre(template, line_names))

    for line in finished:
        line_names: list[str] = []
        for op in ops_of(line):
            if not may_follow(op, line_names):
                return False
            line_names.append(op)
        words = line.split(" ")
        if not kernel_allows(words[1] if words[0] == "kernel" else None, line_names, closed=True):
            return False
        named += line_names
    if set(named) == set(constraint.ops):
        return formats.END_LINE.startswith(current)
    if current and formats.END_LINE.startswith(current):
        return False  # the end line before every op is named
    words = current.split(" ")
    templates = sorted({name for names in constraint.templates for name in names})
    if constraint.templates and words[0] == "kernel" and len(words) == 2:
        return any(name.startswith(words[1]) and can_get_centre(name, []) for name in templates)
    if constraint.templates and len(words) == 1 and words[0] and "kernel".startswith(words[0]) and not (
            "keep".startswith(words[0])):
        return any(can_get_centre(name, []) for name in templates)
    being_written = None
    line_names = []
    template = None
    if words[0] == "keep" and len(words) == 2:
        being_written = words[1]
    elif words[0] == "kernel" and len(words) >= 3:
        template = words[1]
        *line_names, last = words[2].split(",")
        if len(words) > 3:
            line_names.append(last)
        else:
            being_written = last
    checked: list[str] = []
    for op in line_names:
        if not may_follow(op, checked):
            return False
        checked.append(op)
    if not kernel_allows(template, checked, closed=len(words) > 3):
        return False
    return being_written is None or any(
        op.startswith(being_written) and may_follow(op, checked) and kernel_allows(template, [*checked, op], False)
        for op in constraint.ops
    )


def ending_is_allowed(steps: list[str], constraint) -> bool:
    return follows_the_placement_rules("\n".join(steps) + "\n", constraint) and sorted(
        op for line in steps for op in ops_of(line)) == sorted(constraint.ops)


ALPHABET = sorted(set("abcdefghijklmnopqrstuvwxyz_0123456789,= #\n"))


@pytest.mark.parametrize("graph", [*GRAPHS, None], ids=[*IDS, "names-that-prefix-others"])
@settings(max_examples=40, deadline=None)
@given(random=st.randoms(use_true_random=False))
def test_sampling_never_reaches_a_dead_end_and_ends_in_a_whole_answer(graph, random):
    """Whatever was sampled so far, some character can come next, until the answer is whole: a sampler held to the
    grammar never has to stop mid-line."""
    if graph is None:  # op names that start other op names: `add` and `add_1`
        ops = ("add", "add_1", "mul", "add_10")
        constraint = ScriptConstraint(script_line_pattern(ops), ops)
    else:
        constraint = script_constraint(graph)
    grammar = ScriptGrammar(constraint)
    text = ""
    while not grammar.finished(text):
        allowed = [character for character in ALPHABET if grammar.allows(text, character)]
        assert allowed, f"a dead end after {text!r}"
        text += random.choice(allowed)
        assert len(text) < 4000
    parsed = formats.parse_script_answer(text)
    assert parsed.valid, parsed.error
    assert sorted(op for line in parsed.script.splitlines() for op in ops_of(line)) == sorted(constraint.ops)


@pytest.mark.parametrize("graph", GRAPHS, ids=IDS)
def test_the_end_line_ends_the_answer_nothing_but_its_newline_follows(graph):
    """A sampler without a stop string (trl's rollouts) stops only at the end-of-text token: were another end line
    allowed after the first, a policy that no longer favours end-of-text would write them up to its token limit."""
    grammar = ScriptGrammar(script_constraint(graph))
    answer = formats.script_completion(default_script(graph))
    assert answer.endswith(formats.END_LINE + "\n") and grammar.finished(answer)
    assert [character for character in ALPHABET if grammar.allows(answer, character)] == []
    without_newline = answer[:-1]
    assert [character for character in ALPHABET if grammar.allows(without_newline, character)] == ["\n"]
    assert not grammar.allows(without_newline, "\n" + formats.END_LINE)


def test_a_kernel_names_its_ops_in_graph_order_even_when_neither_reads_the_other():
    ops = ("add", "mul", "add_1")
    constraint = ScriptConstraint(script_line_pattern(ops), ops, ((), (), ("add", "mul")))
    grammar = ScriptGrammar(constraint)
    assert accepted_piece_by_piece(grammar, "kernel pointwise add,mul,add_1 block=256 warps=4\n### end\n")
    assert not grammar.allows("kernel pointwise mul,", "add")
    assert not grammar.allows("", "kernel pointwise mul,add block=256 warps=4\n")
    assert not grammar.allows("", "keep add_1\n")  # before the ops it reads


POOL_PARAMETERS = "strategy=direct block=256 window=16 warps=4"


@pytest.mark.parametrize(
    "answer, compiler_says",
    [
        # a pool op in an elementwise kernel
        ("kernel pointwise avg_pool2d block=256 warps=4\nkeep add\nkeep conv2d\nkeep avg_pool1d\nkeep var\n### end\n",
         "is not elementwise"),
        # two pool ops in one pool kernel
        (f"kernel pool avg_pool2d,add,avg_pool1d {POOL_PARAMETERS}\nkeep conv2d\nkeep var\n### end\n",
         "needs exactly one"),
        # a pool kernel without a pool op
        (f"keep avg_pool2d\nkernel pool add {POOL_PARAMETERS}\nkeep conv2d\nkeep avg_pool1d\nkeep var\n### end\n",
         "needs exactly one"),
    ],
)
def test_a_template_asked_for_ops_it_cannot_compute_is_refused(answer, compiler_says):
    graph = GRAPHS[0]  # avg_pool2d, add, avg_pool1d, conv2d (no template computes it), var (a reduction)
    grammar = ScriptGrammar(script_constraint(graph))
    assert not accepted_piece_by_piece(grammar, answer) and not grammar.allows("", answer)
    assert compiler_says in formats.parse_script_answer(answer, graph).error
    assert accepted_piece_by_piece(grammar, formats.script_completion(default_script(graph)))


def test_a_kernel_is_started_only_where_its_template_can_still_get_the_op_it_is_built_around():
    grammar = ScriptGrammar(script_constraint(GRAPHS[0]))
    assert grammar.allows("keep avg_pool2d\nkeep add\n", f"kernel pool avg_pool1d {POOL_PARAMETERS}\n")
    assert grammar.allows("", "kernel pool avg_pool2d,")  # add can still come, in its epilogue
    assert not grammar.allows("", "kernel pool avg_pool2d,add,avg_pool1d")  # a second pool op
    assert not grammar.allows("keep avg_pool2d\n", "kernel pool add ")  # the op list closed without a pool op
    both_kept = "keep avg_pool2d\nkeep avg_pool1d\n"
    assert grammar.allows(both_kept, "kernel poi") and not grammar.allows(both_kept, "kernel poo")  # no pool op left
    assert not grammar.allows("", "kernel r")  # var (reduce, row) reads conv2d, which only a keep line places
    assert not re.fullmatch(script_constraint(GRAPHS[0]).line, "kernel conv conv2d block=64")
