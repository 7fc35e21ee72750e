"""Schedule scripts: lossless round trips (property-tested), precise errors, deterministic decoding.

`print(parse(text)) == text` for every text that parses; a text that does not parse names its line.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.errors import ScheduleError
from drtriton_lsp.compiler.script import KeepLine, KernelLine, Schedule, parse_schedule, print_schedule
from drtriton_lsp.compiler.templates import TEMPLATES
from drtriton_lsp.worker.capture import capture_graph
from drtriton_lsp.worker.op_schemas import schemas_of

NODE_NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,8}", fullmatch=True)


@st.composite
def kernel_lines(draw) -> KernelLine:
    template = TEMPLATES[draw(st.sampled_from(sorted(TEMPLATES)))]
    nodes = draw(st.lists(NODE_NAMES, min_size=1, max_size=5, unique=True))
    params = tuple((spec.name, draw(st.sampled_from(spec.values))) for spec in template.parameters)
    return KernelLine(template.name, tuple(nodes), params)


schedules = st.builds(
    lambda steps, replay: Schedule(tuple(steps), replay),
    st.lists(st.one_of(kernel_lines(), NODE_NAMES.map(KeepLine)), max_size=8),
    st.booleans(),
)


@settings(max_examples=200, deadline=None)
@given(schedules)
def test_printing_then_parsing_gives_the_same_schedule_and_text(schedule):
    text = print_schedule(schedule)
    assert parse_schedule(text) == schedule
    assert print_schedule(parse_schedule(text)) == text


@st.composite
def edited_scripts(draw) -> str:
    """A valid script with one random character inserted, deleted or replaced."""
    text = print_schedule(draw(schedules))
    position = draw(st.integers(min_value=0, max_value=len(text)))
    edit = draw(st.sampled_from(["insert", "delete", "replace"]))
    character = draw(st.sampled_from(list(" =,x0123456789abkn_\n\t")))
    if edit == "insert":
        return text[:position] + character + text[position:]
    if edit == "delete":
        return text[:position] + text[position + 1 :]
    return text[:position] + character + text[position + 1 :]


@settings(max_examples=400, deadline=None)
@given(edited_scripts())
def test_any_text_either_parses_back_to_itself_or_is_rejected_with_a_line(text):
    try:
        schedule = parse_schedule(text)
    except ScheduleError as error:
        assert error.message.startswith("line "), error.message
        assert error.hint
        return
    assert print_schedule(schedule) == text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("kernel pointwise add block=1024\n", "line 1: kernel pointwise takes parameters block warps, in that order"),
        ("kernel pointwise add warps=4 block=1024\n", "in that order; got warps block"),
        ("keep add\nkernel pointwise mul block=1000 warps=4\n", "line 2: kernel pointwise, parameter block: expected a power of two"),
        ("kernel pointwise mul block=01024 warps=4\n", "expected a decimal integer"),
        ("kernel teleport add\n", "line 1: unknown template 'teleport'"),
        ("keep add\n\nkeep mul\n", "line 2: steps are words separated by single spaces"),
        ("keep add", "line 1: the script must end with a newline"),
        ("fuse add\n", "line 1: a step starts with 'kernel' or 'keep'"),
        ("kernel pointwise add,add block=64 warps=1\n", "line 1: an op is listed twice"),
        ("replay cuda_graph\nkeep add\n", "line 1: 'replay cuda_graph' can only be the last line"),
        ("keep add\nreplay cudagraphs\n", "line 2: expected 'replay cuda_graph', got 'replay cudagraphs'"),
    ],
)
def test_syntax_errors_name_the_line_and_the_choice(text, expected):
    with pytest.raises(ScheduleError) as raised:
        parse_schedule(text)
    assert expected in raised.value.message


class GatedResidual(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(8, 8)

    def forward(self, x):
        hidden = self.proj(x)
        gate = torch.sigmoid(hidden) * 2.0
        return gate + x, hidden.sum(-1)


@pytest.fixture(scope="module")
def gated_graph():
    return capture_graph(GatedResidual().eval(), (torch.randn(3, 8),))


# linear stays a PyTorch call here: a keep line fits whichever templates claim linear
KEEP_LINEAR_SCRIPT = "keep linear\nkeep sum_1\nkernel pointwise sigmoid,mul,add block=1024 warps=4\n"


def compile_with(graph, script: str | None):
    return compile_graph(graph, prefix="gated", forward_params=["x"], has_self=True, schedule=script)


# Decodes a script in a fresh interpreter without torch (the compiler needs only the schemas the capture sends): same
# graph, same script, another hash seed.
DECODE = """
import json, sys
sys.modules["torch"] = None  # `import torch` fails
from drtriton_lsp.compiler import aten_schemas
from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.graph import OpGraph
graph, schemas, scripts = json.loads(sys.stdin.read())
aten_schemas.remember(schemas)
programs = [
    compile_graph(OpGraph.from_json(graph), prefix="gated", forward_params=["x"], has_self=True, schedule=script)
    for script in scripts
]
print(json.dumps([[program.kernel_block, program.schedule] for program in programs]))
"""


def decoded_elsewhere(graph, scripts: list[str], hash_seed: int) -> list[list[str]]:
    finished = subprocess.run(
        [sys.executable, "-c", DECODE], input=json.dumps([graph.to_json(), schemas_of(graph), scripts]),
        capture_output=True, text=True, env={**os.environ, "PYTHONHASHSEED": str(hash_seed)}, timeout=120,
    )
    assert finished.returncode == 0, finished.stderr
    return json.loads(finished.stdout)


@pytest.mark.slow
def test_a_script_decodes_to_the_same_source_in_any_process(gated_graph):
    # the script is the whole record of the lowering: a saved one gives the same kernels in another process (set
    # and dict orders change with the hash seed), and decoding it records it back unchanged
    default = compile_with(gated_graph, None)
    edited = KEEP_LINEAR_SCRIPT.replace("block=1024 warps=4", "block=128 warps=2")
    by_edit = compile_with(gated_graph, edited)
    assert by_edit.schedule == edited and by_edit.kernel_block != default.kernel_block
    expected = [[default.kernel_block, default.schedule], [by_edit.kernel_block, edited]]
    for hash_seed in (1, 2):
        assert decoded_elsewhere(gated_graph, [default.schedule, edited], hash_seed) == expected


def test_changing_a_parameter_changes_only_what_it_controls(gated_graph):
    default = compile_with(gated_graph, KEEP_LINEAR_SCRIPT)
    assert "kernel pointwise sigmoid,mul,add block=1024 warps=4\n" in default.schedule
    tuned = compile_with(gated_graph, default.schedule.replace("block=1024 warps=4", "block=256 warps=2"))
    assert tuned.kernel_block != default.kernel_block
    assert tuned.kernel_block.replace("BLOCK = 256", "BLOCK = 1024").replace("num_warps=2", "num_warps=4") == default.kernel_block


def script_lines() -> list[str]:
    return KEEP_LINEAR_SCRIPT.splitlines()


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (lambda lines: lines[1:], "ops not scheduled: linear"),
        (lambda lines: lines + ["keep linear"], "linear is already scheduled on line 1"),
        (lambda lines: [lines[-1]] + lines[:-1], "line 1: sigmoid reads linear, which no earlier line computes"),
        (lambda lines: [line.replace("sigmoid,", "sigmoid,nonexistent,") for line in lines], "the graph has no op 'nonexistent'"),
        (lambda lines: [line.replace("sigmoid,mul,add", "mul,sigmoid,add") for line in lines], "lists its ops in graph order"),
        (lambda lines: ["kernel pointwise linear block=64 warps=1"] + lines[1:], "linear (aten.linear.default) is not elementwise"),
    ],
)
def test_scripts_that_do_not_fit_the_graph_are_rejected_precisely(gated_graph, edit, expected):
    script = "\n".join(edit(script_lines())) + "\n"
    with pytest.raises(ScheduleError) as raised:
        compile_with(gated_graph, script)
    assert expected in raised.value.message, raised.value.message


def test_a_pointwise_kernel_may_be_split_in_two(gated_graph):
    lines = script_lines()
    split = [
        line.replace("kernel pointwise sigmoid,mul,add block=1024 warps=4", "kernel pointwise sigmoid block=64 warps=1\nkernel pointwise mul,add block=128 warps=2")
        for line in lines
    ]
    program = compile_with(gated_graph, "\n".join(split) + "\n")
    assert len([kernel for kernel in program.kernels if "sigmoid" in kernel or "mul" in kernel]) == 2


def test_a_replay_line_ends_the_script_and_reaches_the_program(gated_graph):
    script = KEEP_LINEAR_SCRIPT + "replay cuda_graph\n"
    schedule = parse_schedule(script)
    assert schedule.replay and schedule.steps == parse_schedule(KEEP_LINEAR_SCRIPT).steps
    program = compile_with(gated_graph, script)
    assert program.replay and program.schedule == script
    plain = compile_with(gated_graph, KEEP_LINEAR_SCRIPT)
    assert not plain.replay and plain.kernel_block == program.kernel_block  # the replay is the dispatch's


class LinearStack(nn.Module):
    """Linear layers with an epilogue after each: one matmul kernel per layer."""

    def __init__(self, layers: int):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(8, 8) for _ in range(layers))

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x)) * 2.0
        return x


@pytest.mark.parametrize(("layers", "replayed"), [(3, False), (4, True)])
def test_the_default_schedule_replays_a_forward_of_many_steps(layers, replayed):
    from drtriton_lsp.compiler.planner import REPLAY_FROM_STEPS, default_schedule

    graph = capture_graph(LinearStack(layers).eval(), (torch.randn(3, 8),))
    schedule = default_schedule(graph)
    assert (len(schedule.steps) >= REPLAY_FROM_STEPS) == replayed
    assert schedule.replay == replayed
    assert print_schedule(schedule).endswith("replay cuda_graph\n") == replayed


def test_the_default_does_not_replay_where_copying_inputs_and_outputs_costs_more_than_the_launches():
    """The replay copies the inputs in and the outputs out: at a batch of 4 M rows (134 MB a tensor) those copies and
    the steps' own traffic outlast four launches' host time, so the same four steps run plainly."""
    from drtriton_lsp.compiler.planner import COPY_BYTES_PER_SECOND, default_schedule, replay_estimate

    graph = capture_graph(LinearStack(4).eval(), (torch.randn(3, 8),))
    (batch,) = graph.symbol_hints
    for rows, replayed in ((3, True), (2**18, True), (2**22, False)):
        sized = dataclasses.replace(graph, symbol_hints={batch: rows})
        schedule = default_schedule(sized)
        assert schedule.replay == replayed, rows
        # the copies: x in and the result out, float32 [rows, 8] each, every byte read and written
        copied = 2 * 2 * rows * 8 * 4
        assert replay_estimate(schedule.steps, sized).copy_s == pytest.approx(copied / COPY_BYTES_PER_SECOND)


def test_a_model_written_script_of_steps_gets_the_replay_line_the_default_would():
    from drtriton_lsp.compiler.planner import default_schedule, with_default_replay

    for layers in (3, 4):
        graph = capture_graph(LinearStack(layers).eval(), (torch.randn(3, 8),))
        schedule = default_schedule(graph)
        steps_only = print_schedule(Schedule(schedule.steps))
        assert with_default_replay(steps_only, graph) == print_schedule(schedule)
    assert with_default_replay("keep add\nreplay cuda_graph\n", graph) == "keep add\nreplay cuda_graph\n"
