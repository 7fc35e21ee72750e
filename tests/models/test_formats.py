"""The model formats: prompts carry the graph a script names, completions round-trip, bad answers become feedback.

Graphs are two captured CSP-DAG level-5 programs (tests/fixtures/csp_dag_level5_graphs.json).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.compiler.planner import with_default_replay
from drtriton_lsp.models import formats

FIXTURE = Path(__file__).resolve().parent.parent / "fixtures" / "csp_dag_level5_graphs.json"
GRAPHS = [OpGraph.from_json(data) for data in json.loads(FIXTURE.read_text())]


def default_script(graph: OpGraph) -> str:
    params = [graph_input.target for graph_input in graph.inputs if graph_input.kind == "user_input"]
    return compile_graph(graph, prefix="model", forward_params=params, has_self=True).schedule


@pytest.mark.parametrize("graph", GRAPHS, ids=["pool-conv-var", "norm-conv-bmm"])
def test_the_compilers_script_round_trips_through_completion_and_parser(graph):
    """The completion holds the steps alone; the product gives them the replay line the default would."""
    script = default_script(graph)
    completion = formats.script_completion(script)
    answer = formats.parse_script_answer(completion, graph)
    assert answer.valid and "replay" not in completion
    assert with_default_replay(answer.script, graph) == script


def test_the_prompt_names_every_op_the_script_schedules_with_its_aten_call_and_result():
    graph = GRAPHS[0]
    prompt = formats.script_prompt(graph)
    assert prompt.startswith(f"### drtriton script writer, format {formats.FORMAT_VERSION}\n")
    assert prompt.endswith("### script\n")
    assert "op var = aten.var.dim(conv2d, [0]) -> float32[40, (((d1 - 1)//3)) - 1, (((d2 - 1)//3)) - 1]\n" in prompt
    assert "input x: float32[d0, 2, d1, d2] user_input\n" in prompt
    assert "size d0 = 5 range 2..\n" in prompt
    assert "output avg_pool1d, var\n" in prompt
    # export's own symbol numbering (s77, ...) never reaches the prompt
    assert not any(word.startswith("s") and word[1:].isdigit() for word in prompt.replace(",", " ").split())


def test_symbols_are_renumbered_so_the_same_program_gives_the_same_prompt_whatever_export_called_them():
    data = json.loads(FIXTURE.read_text())[0]
    renamed = json.loads(re.sub(r"\bs([0-9]+)\b", r"v\g<1>0", json.dumps(data)))
    assert renamed != data  # every symbol has a new name and number
    assert formats.script_prompt(OpGraph.from_json(renamed)) == formats.script_prompt(GRAPHS[0])


def test_refinement_prompt_carries_the_current_script_and_its_time_or_the_rejection():
    graph = GRAPHS[1]
    script = default_script(graph)
    timed = formats.refine_prompt(graph, script, measured_ms=0.01234)
    assert f"### current script, measured 0.01234 ms\n{script}### faster script\n" in timed
    rejected = formats.refine_prompt(graph, script, feedback="the results differ\nfrom the reference")
    assert "### current script, rejected: the results differ from the reference\n" in rejected
    assert timed.startswith(formats.script_prompt(graph).removesuffix("### script\n"))



def test_kernel_refinement_prompt_carries_the_program_the_current_module_and_its_time_or_the_rejection():
    program, module = "class Model:\n    pass", "class ModelNew:\n    pass\n"
    timed = formats.kernel_refine_prompt(program, module, measured_ms=1.5)
    assert timed.startswith(formats.kernel_prompt(program).removesuffix("### ModelNew\n"))
    assert timed.endswith(f"### current ModelNew, measured 1.5 ms\n{module}### faster ModelNew\n")
    rejected = formats.kernel_refine_prompt(program, module, measured_ms=1.5, feedback="max abs error\n3.2")
    assert "### current ModelNew, rejected: max abs error 3.2\n" in rejected
    assert "### current ModelNew, not measured\n" in formats.kernel_refine_prompt(program, module)


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("", "the answer is empty"),
        ("kernel pointwise\n### end\n", "expected 'kernel <template>"),
        ("kernel teleport erf block=1024 warps=4\n", "unknown template 'teleport'"),
        ("kernel pointwise erf warps=4 block=1024\n", "takes parameters block warps, in that order"),
        ("kernel pointwise erf block=1000 warps=4\n", "expected a power of two"),
        ("keep conv3d\nkernel pointwise sigmoid block=1024 wa", "must end with a newline"),
        ("hello world\n", "a step starts with 'kernel' or 'keep'"),
    ],
)
def test_an_answer_that_does_not_parse_comes_back_with_the_parsers_message(completion, expected):
    answer = formats.parse_script_answer(completion, GRAPHS[1])
    assert not answer.valid and answer.script is None
    assert expected in answer.error


def test_a_script_that_parses_but_does_not_fit_the_graph_says_which_op_is_missing():
    script = default_script(GRAPHS[1])
    without_bmm = "".join(line + "\n" for line in script.splitlines() if "bmm" not in line and "replay" not in line)
    answer = formats.parse_script_answer(formats.script_completion(without_bmm), GRAPHS[1])
    assert not answer.valid
    assert answer.script == without_bmm  # it parsed: the script is kept for the refinement turn
    assert "ops not scheduled: bmm" in answer.error
    # without a graph only the syntax is checked
    assert formats.parse_script_answer(without_bmm).valid


def test_a_fenced_answer_and_text_after_the_end_line_are_read_as_the_script_alone():
    script = default_script(GRAPHS[0])
    fenced = f"```text\n{script}```\n### end\nkernel nonsense\n"
    assert formats.parse_script_answer(fenced, GRAPHS[0]).script == script
    assert formats.parse_script_answer(script + "### end\nthe model went on\n", GRAPHS[0]).valid


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("kernel keep pointwise erf,sigmoid=1024 warps\n#`x")), max_size=120))
def test_no_answer_text_makes_the_script_parser_raise(text):
    answer = formats.parse_script_answer(text, GRAPHS[1])
    assert answer.valid or answer.error


KERNEL_MODULE = '''"""Triton kernels for Model."""

import torch
import triton
import triton.language as tl


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return x
'''


def test_the_kernel_writer_prompt_holds_the_program_and_the_module_round_trips():
    program = "import torch\n\nclass Model(torch.nn.Module):\n    pass\n"
    prompt = formats.kernel_prompt(program)
    header = f"### drtriton kernel writer, format {formats.FORMAT_VERSION}\n"
    assert prompt == f"{header}### program\n{program}### ModelNew\n"
    answer = formats.extract_kernel_answer(formats.kernel_completion(KERNEL_MODULE))
    assert answer.valid and answer.source == KERNEL_MODULE


@pytest.mark.parametrize(
    ("completion", "expected"),
    [
        ("", "the answer is empty"),
        ("def forward(:\n", "the module does not parse: line 1"),
        ("import torch\n\nclass Model(torch.nn.Module):\n    pass\n", "defines no top-level class ModelNew"),
        ("def make():\n    class ModelNew:\n        pass\n", "defines no top-level class ModelNew"),
        ("x = '\0'\n", "the module does not parse"),
    ],
)
def test_a_kernel_answer_that_is_not_a_module_defining_model_new_says_why(completion, expected):
    answer = formats.extract_kernel_answer(completion)
    assert not answer.valid and answer.source is None
    assert expected in answer.error


def test_a_fenced_kernel_answer_is_read_without_its_fence():
    answer = formats.extract_kernel_answer(f"```python\n{KERNEL_MODULE}```\nThis module computes...\n")
    assert answer.source == KERNEL_MODULE


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_no_answer_text_makes_the_kernel_extractor_raise(text):
    answer = formats.extract_kernel_answer(text)
    assert answer.valid or answer.error


def test_the_formats_module_imports_without_torch_so_the_language_server_can_load_it():
    code = "import sys, drtriton_lsp.models.formats; print('torch' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.strip() == "False"
