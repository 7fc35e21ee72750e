"""The script grammar that holds a script writer's sampling: every script the compiler and the search write is in it,
everything in it parses, and the token-by-token check agrees with the whole-answer pattern a server gets.

Graphs are two captured CSP-DAG level-5 programs (tests/fixtures/csp_dag_level5_graphs.json).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import regex
from hypothesis import given, settings
from hypothesis import strategies as st

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.fragments import UnsearchableFragment, search_steps, step_alternatives
from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.compiler.script import parse_schedule
from drtriton_lsp.models import formats
from drtriton_lsp.models.script_grammar import ScriptGrammar, answer_pattern, script_line_pattern

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "csp_dag_level5_graphs.json"
GRAPHS = [OpGraph.from_json(data) for data in json.loads(FIXTURE.read_text())]
IDS = ["pool-conv-var", "norm-conv-bmm"]


def default_script(graph: OpGraph) -> str:
    params = [graph_input.target for graph_input in graph.inputs if graph_input.kind == "user_input"]
    return compile_graph(graph, prefix="model", forward_params=params, has_self=True).schedule


def accepted_piece_by_piece(grammar: ScriptGrammar, text: str, size: int = 1) -> bool:
    """Whether sampling `text` in pieces of `size` characters keeps every prefix allowed."""
    return all(grammar.allows(text[:start], text[start:start + size]) for start in range(0, len(text), size))


@pytest.mark.parametrize("graph", GRAPHS, ids=IDS)
def test_every_script_the_compiler_and_the_search_write_is_in_the_grammar(graph):
    line = script_line_pattern(graph)
    base = parse_schedule(default_script(graph))
    lines = [step.render() for step in base.steps]
    for step in search_steps(graph, base):
        try:
            lines += [alternative.render() for _label, chosen in step_alternatives(graph, step) for alternative in chosen]
        except UnsearchableFragment:
            continue
    assert len(set(lines)) > len(base.steps)  # the search's alternatives are in, not only the default
    for text in lines:
        assert re.fullmatch(line, text), text
    answer = formats.script_completion(default_script(graph))
    assert re.fullmatch(answer_pattern(line), answer)
    grammar = ScriptGrammar(line)
    assert accepted_piece_by_piece(grammar, answer) and accepted_piece_by_piece(grammar, answer, size=7)
    assert grammar.finished(answer) and not grammar.finished(answer[: answer.index(formats.END_LINE)])


@pytest.mark.parametrize("graph", GRAPHS, ids=IDS)
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_every_answer_in_the_grammar_parses_as_a_script_over_the_graphs_ops(graph, data):
    line = script_line_pattern(graph)
    answer = data.draw(st.from_regex(answer_pattern(line), fullmatch=True))
    parsed = formats.parse_script_answer(answer)
    if "an op is listed twice in one kernel" in parsed.error:  # beyond a regular expression: the token check has it
        assert not accepted_piece_by_piece(ScriptGrammar(line), answer)
        return
    assert parsed.valid, parsed.error
    assert accepted_piece_by_piece(ScriptGrammar(line), answer)
    names = {node.name for node in graph.nodes}
    for step in parse_schedule(parsed.script).steps:
        assert set(getattr(step, "nodes", (getattr(step, "node", None),))) <= names


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
        "keep {op}\n### end and more",
    ],
)
def test_what_the_parser_refuses_the_grammar_refuses_piece_by_piece(answer):
    graph = GRAPHS[0]
    text = answer.format(op=graph.nodes[0].name)
    line = script_line_pattern(graph)
    assert re.fullmatch(answer_pattern(line), text) is None
    assert not accepted_piece_by_piece(ScriptGrammar(line), text)
    assert not formats.parse_script_answer(text, graph).valid


def test_one_op_twice_in_a_kernel_is_beyond_the_pattern_and_refused_piece_by_piece():
    graph = GRAPHS[0]
    op = graph.nodes[0].name
    text = f"kernel pointwise {op},{op} block=256 warps=4\n### end\n"
    line = script_line_pattern(graph)
    assert re.fullmatch(answer_pattern(line), text)  # a regular expression cannot say "distinct"
    assert not accepted_piece_by_piece(ScriptGrammar(line), text)
    assert "an op is listed twice" in formats.parse_script_answer(text).error


@settings(max_examples=300, deadline=None)
@given(text=st.text(alphabet="kepnrl tiwsob=,_0123456789#d\n", max_size=40) | st.sampled_from(["keep ", "### e"]))
def test_the_token_check_agrees_with_the_whole_answer_pattern_on_any_text(text):
    graph = GRAPHS[1]
    line = script_line_pattern(graph)
    whole = regex.compile(answer_pattern(line))
    grammar = ScriptGrammar(line)
    for prefix in (text, "keep " + graph.nodes[0].name + "\n" + text):
        in_pattern = whole.fullmatch(prefix, partial=True) is not None
        repeats = any(_repeats(line_text) for line_text in prefix.split("\n"))
        assert accepted_piece_by_piece(grammar, prefix) == (in_pattern and not repeats), prefix


def _repeats(line: str) -> bool:
    words = line.split(" ")
    names = words[2].split(",") if len(words) >= 3 and words[0] == "kernel" else []
    named = names if len(words) > 3 else names[:-1]
    return len(set(named)) != len(named)
