"""Prompts that leave the model no room to answer (level-20 prompts run past the shipped model's 1536 tokens): `rl`
leaves their programs out when it selects them and logs how many, `eval` reports them as "prompt too long" apart from
the model's failures. Programs are captured CSP-DAG training programs (tests/fixtures/csp_dag_training_graphs.json),
measured with the shipped model's tokenizer.
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from types import SimpleNamespace

import torch
from transformers import AutoTokenizer

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.engine.verify import Verdict
from drtriton_lsp.models import formats
from drtriton_lsp.worker.capture import capture_graph
from drtriton_training import evaluate as evaluation
from drtriton_training.answer_room import model_context, prompt_problem
from drtriton_training.curriculum import Curriculum
from drtriton_training.evaluate import EvalOptions, Sampler, to_markdown
from drtriton_training.rewards import RlProgram
from drtriton_training.rl import NOTHING_TO_PLACE, RunLog, answerable_programs
from drtriton_training.rl_configs import recipe

SHIPPED_MODEL = Path(__file__).resolve().parents[1] / "models"
GRAPHS = {record["hash"]: record for record in json.loads(
    (Path(__file__).resolve().parents[2] / "tests" / "fixtures" / "csp_dag_training_graphs.json").read_text())}
# level-20 programs, by their prompt and their compiler script in the shipped tokenizer's tokens
FITS = "e64aeb9c1610ff2beee0"  # 1155 + 196: fits 1536 with either room
SCRIPT_RUNS_PAST = "ed88abf5b37f48e935d5"  # 1280 + 280 = 1560: the compiler's script runs past the context
PROMPT_TOO_LONG_FOR_RL = "4f2e28904323d1815156"  # 1313: leaves 223 tokens, fewer than a rollout's 256


def program(hash_: str, split: str = "validation") -> RlProgram:
    record = GRAPHS[hash_]
    graph = OpGraph.from_json(record["graph"])
    forward_params = tuple(graph_input.target for graph_input in graph.inputs if graph_input.kind == "user_input")
    return RlProgram(hash_, record["level"], split, record["source"], record["graph"], forward_params,
                     formats.script_prompt(graph))


def test_the_shipped_models_context_holds_a_prompt_and_its_room_or_says_by_how_much_it_does_not():
    assert model_context(SHIPPED_MODEL) == 1536
    assert prompt_problem(1280, 256, 1536) == ""
    assert prompt_problem(1313, 256, 1536) == (
        "prompt too long: its 1313 tokens leave 223 of the model's 1536 to answer in, fewer than 256")
    assert prompt_problem(1600, 256, 1536).startswith("prompt too long: its 1600 tokens leave 0 of")
    assert prompt_problem(10_000, 256, None) == ""  # a model without a bound on its positions


class CompilerScripts(Sampler):
    """The shipped tokenizer and context, answering each prompt with its program's compiler script."""

    def __init__(self, answers: dict[str, str]):
        context = model_context(SHIPPED_MODEL)
        model = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=context))
        super().__init__(model, AutoTokenizer.from_pretrained(SHIPPED_MODEL), "cpu")
        self.answers = answers
        self.prompts: list[str] = []

    def complete(self, prompt, samples, temperature, max_new_tokens, constraint=None):
        self.prompts.append(prompt)
        return [self.answers[prompt]] * samples


def test_eval_reports_a_prompt_with_no_room_for_its_answer_as_too_long_not_as_a_model_failure(tmp_path, monkeypatch):
    programs = [program(SCRIPT_RUNS_PAST), program(FITS)]
    path = tmp_path / "programs.jsonl"
    path.write_text("".join(json.dumps(asdict(p)) + "\n" for p in programs))
    answers = {}
    for each in programs:
        graph = OpGraph.from_json(each.graph)
        compiled = compile_graph(graph, prefix="model", forward_params=list(each.forward_params), has_self=True)
        answers[each.prompt] = formats.script_completion(compiled.schedule)
    sampler = CompilerScripts(answers)
    monkeypatch.setattr(evaluation, "verify_module", lambda *args, **kwargs: Verdict(True, None, ""))
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    logged: list[str] = []
    results = evaluation.evaluate(model_dir, EvalOptions(levels=(20,), samples=2, programs=path), log=logged.append,
                                  sampler=sampler)

    too_long, fits = results["programs"]
    assert too_long["prompt_too_long"].startswith("prompt too long: its 1280 tokens leave 256 of the model's 1536")
    assert (too_long["valid"], too_long["correct"]) == (0, 0) and sampler.prompts == [programs[1].prompt]
    assert "prompt_too_long" not in fits and fits["correct"] == 2
    level = results["by_level"]["20"]
    assert (level["programs"], level["prompt_too_long"], level["capture_errors"]) == (2, 1, 0)
    assert level["pass@1"] == 1.0 and level["valid_share"] == 1.0  # over the program the model could answer
    assert "prompt too long" in logged[0]
    assert "| prompt_too_long |" in to_markdown(results)


class FirstColumns(torch.nn.Module):
    """A program of views alone: its graph has no op a script places."""

    def forward(self, x):
        return x[:, :2]


def test_rl_leaves_out_the_programs_it_cannot_answer_when_it_selects_them_and_logs_how_many(tmp_path):
    views = capture_graph(FirstColumns(), (torch.randn(3, 4),))
    only_views = RlProgram("0" * 20, 1, "train", "", views.to_json(), ("x",), formats.script_prompt(views))
    programs = [program(FITS, "train"), program(SCRIPT_RUNS_PAST, "train"), program(PROMPT_TOO_LONG_FOR_RL, "train"),
                only_views]
    small = recipe("small", [])
    logged: list[str] = []
    run_log = RunLog(tmp_path / "rl_log.jsonl", Curriculum((1, 2, 5, 20), 0.5), "drpo", logged.append)
    tokenizer = AutoTokenizer.from_pretrained(SHIPPED_MODEL)

    kept = answerable_programs(programs, tokenizer, model_context(SHIPPED_MODEL), small, run_log)

    assert small.max_completion_length == 256
    assert [each.hash for each in kept] == [FITS, SCRIPT_RUNS_PAST]
    [event] = [json.loads(line) for line in (tmp_path / "rl_log.jsonl").read_text().splitlines()]
    assert event["event"] == "programs" and event["programs"] == 4
    assert event["left_out"] == {"prompt too long": {"20": 1}, NOTHING_TO_PLACE: {"1": 1}}
    assert event["answer_longer_than_completion"] == {"20": 1}  # ed88's script: 280 tokens
    assert logged[0].startswith("left out 1 of level 20: prompt too long (less than max_completion_length=256 of")
    assert logged[1] == f"left out 1 of level 1: {NOTHING_TO_PLACE} (the graph has no op a script places)"
    assert logged[2].startswith("warning: 1 of level 20: the compiler's answer is longer than max_completion_length")
    roomy = recipe("small", ["max_completion_length=128"])
    assert [each.hash for each in answerable_programs(programs[:3], tokenizer, 1536, roomy, run_log)] == [
        FITS, SCRIPT_RUNS_PAST, PROMPT_TOO_LONG_FOR_RL]
