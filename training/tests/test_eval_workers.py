"""eval's speed path and its workers, without a GPU: the best of k is picked by one `time_candidates` worker and then
benchmarked once (not one benchmark and torch.compile per verified sample), programs are judged side by side in the
order asked, an `rl` run's validation split is evaluated from its captured graphs (no capture worker), and a share
faster than eager is reported beside the one faster than torch.compile.
"""

from __future__ import annotations

import json
import threading
import time
from dataclasses import asdict
from pathlib import Path

import pytest

from drtriton_lsp.compiler.codegen import compile_graph
from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.engine.verify import Verdict
from drtriton_lsp.models import formats
from drtriton_lsp.runners.local import JobFailure
from drtriton_lsp.source.dispatch import declares_replay
from drtriton_training import evaluate as evaluation
from drtriton_training.evaluate import EvalOptions, level_summary, to_markdown
from drtriton_training.programs import load_heldout
from drtriton_training.rewards import RlProgram, capture_of_record
from drtriton_training.rl import _program_from_json
from drtriton_training.teach import Capture

PRODUCT_FIXTURES = Path(__file__).resolve().parents[2] / "tests" / "fixtures"
TIMING = {"eager_ms": 2.0, "compile_ms": 1.0, "triton_ms": 0.5, "speedup_vs_eager": 4.0, "speedup_vs_compile": 2.0}


class FakeRunner:
    """Answers the product's worker methods from a table, and records what was asked."""

    def __init__(self, answers: dict):
        self.answers = answers
        self.calls: list[tuple[str, dict]] = []

    def call(self, method, params, limits=None, env=None, **_options):
        self.calls.append((method, params))
        answer = self.answers[method]
        if isinstance(answer, Exception):
            raise answer
        return answer(params) if callable(answer) else answer


def capture() -> Capture:
    program = level5_program(0)
    from drtriton_training.rewards import capture_of_record

    return capture_of_record(program)


def level5_program(index: int) -> RlProgram:
    """Held-out level-5 program `index` as an `rl` run's programs.jsonl holds it (graph from the product's fixture)."""
    graph = json.loads((PRODUCT_FIXTURES / "csp_dag_level5_graphs.json").read_text())[index]
    heldout = load_heldout(5)[index]
    return RlProgram(heldout.hash, 5, "validation", heldout.source, graph, ("x", "y"),
                     formats.script_prompt(OpGraph.from_json(graph)))


def test_the_best_of_several_verified_samples_is_picked_by_one_timing_then_benchmarked_once():
    runner = FakeRunner({
        "time_candidates": {"reference_ms": 2.0, "candidate_ms": [3.0, 0.4, 1.0]},
        "benchmark": {"timing": TIMING},
    })
    timing = evaluation._best_timing(capture(), ["a", "b", "c"], EvalOptions(device="cuda"), runner)
    assert [method for method, _ in runner.calls] == ["time_candidates", "benchmark"]
    assert runner.calls[0][1]["candidates"] == ["a", "b", "c"]
    assert runner.calls[1][1]["candidate"] == "b"
    # the figure reported is the benchmark's own measurement, not the one the module was picked by
    assert timing == {**TIMING, "chosen_from": 3}


def test_a_single_verified_sample_is_benchmarked_without_a_selection_timing():
    runner = FakeRunner({"benchmark": {"timing": TIMING}})
    assert evaluation._best_timing(capture(), ["a"], EvalOptions(device="cuda"), runner)["chosen_from"] == 1
    assert [method for method, _ in runner.calls] == ["benchmark"]
    assert evaluation._best_timing(capture(), [], EvalOptions(device="cuda"), runner) is None


def test_when_the_selection_timing_fails_each_sample_is_benchmarked_and_the_fastest_kept():
    def benchmark(params):
        return {"timing": {**TIMING, "triton_ms": {"a": 0.9, "b": 0.3}[params["candidate"]]}}

    runner = FakeRunner({"time_candidates": JobFailure("crashed", "boom"), "benchmark": benchmark})
    timing = evaluation._best_timing(capture(), ["a", "b"], EvalOptions(device="cuda"), runner)
    assert [method for method, _ in runner.calls] == ["time_candidates", "benchmark", "benchmark"]
    assert timing["triton_ms"] == 0.3 and timing["chosen_from"] == 2


class PromptSampler:
    """Answers each prompt with its program's default script and a malformed answer; notes how many run at once."""

    def __init__(self, answers: dict[str, str]):
        self.answers = answers
        self.running = 0
        self.most_at_once = 0
        self.lock = threading.Lock()

    def prompt_problem(self, prompt, answer):
        return ""  # every prompt fits: the room check has tests of its own (test_answer_room.py)

    def complete(self, prompt, samples, temperature, max_new_tokens, constraint=None):
        with self.lock:
            self.running += 1
            self.most_at_once = max(self.most_at_once, self.running)
        time.sleep(0.05)
        with self.lock:
            self.running -= 1
        return [self.answers[prompt], "kernel nonsense\n### end\n"][:samples]


def test_an_rl_runs_validation_split_is_judged_side_by_side_in_order_from_its_captured_graphs(tmp_path, monkeypatch):
    programs = [level5_program(0), level5_program(1)]
    train = RlProgram(**{**asdict(programs[1]), "hash": "0" * 20, "split": "train"})
    path = tmp_path / "programs.jsonl"
    path.write_text("".join(json.dumps(asdict(p)) + "\n" for p in [programs[0], train, programs[1]]))
    answers = {}
    for program in programs:
        graph = OpGraph.from_json(program.graph)
        default = compile_graph(graph, prefix="model", forward_params=list(program.forward_params), has_self=True)
        answers[program.prompt] = formats.script_completion(default.schedule)
    sampler = PromptSampler(answers)
    verifying, most_verifying, lock = [0], [0], threading.Lock()
    # each program's verification ends only once the other's has begun, whichever thread gets there first (or after
    # a timeout when the two are judged one after the other, which the overlap count below then shows)
    both_judging = threading.Barrier(2, timeout=30)

    def verify(capture, module, options, runner, tf32=False, then=None):
        with lock:
            verifying[0] += 1
            most_verifying[0] = max(most_verifying[0], verifying[0])
        try:
            both_judging.wait()
        except threading.BrokenBarrierError:
            pass
        with lock:
            verifying[0] -= 1
        return Verdict(verified=True, reason=None, detail="")

    monkeypatch.setattr(evaluation, "verify_module", verify)
    monkeypatch.setattr(evaluation, "capture_program", lambda *a, **k: pytest.fail("captured again in a worker"))
    model_dir = tmp_path / "model"
    model_dir.mkdir()
    options = EvalOptions(levels=(5,), per_level=8, samples=2, workers=2, programs=path)
    logged: list[str] = []
    results = evaluation.evaluate(model_dir, options, log=logged.append, sampler=sampler)

    assert [record["hash"] for record in results["programs"]] == [p.hash for p in programs]  # no train program
    assert [line.split()[2].rstrip(":") for line in logged] == [p.hash for p in programs]
    assert all((record["valid"], record["correct"]) == (1, 1) for record in results["programs"])
    assert most_verifying[0] == 2 and sampler.most_at_once == 1  # judged at once, one generate at a time
    assert results["options"]["programs"] == str(path) and results["options"]["workers"] == 2
    assert f"the validation split of {path}; 2 judged at once" in to_markdown(results)
    # programs.jsonl without guards (as written before they were kept): the report says what was judged
    assert {record["judged_as"] for record in results["programs"]} == {"plain"}
    assert "2 of 2 programs judged their script answers as the plain ModelNew" in to_markdown(results)

    stopped = evaluation.evaluate(model_dir, EvalOptions(levels=(5,), samples=2, workers=2, programs=path,
                                                         time_limit_s=0), sampler=sampler)
    assert stopped["partial"] and stopped["programs"] == []


def test_the_speed_summary_counts_programs_faster_than_eager_and_than_compile_over_all_judged():
    records = [
        {"samples": 4, "valid": 4, "correct": 2, "timing": TIMING},
        {"samples": 4, "valid": 4, "correct": 1, "timing": {**TIMING, "speedup_vs_eager": 1.5, "speedup_vs_compile": 0.8}},
        {"samples": 4, "valid": 0, "correct": 0, "timing": None},  # nothing verified: not faster
    ]
    summary = level_summary(records, 4)
    assert summary["timed"] == 2
    assert summary["share_faster_than_eager"] == pytest.approx(2 / 3)
    assert summary["share_faster_than_compile"] == pytest.approx(1 / 3)


def test_the_rl_table_compares_the_models_on_the_programs_every_evaluation_reached():
    import importlib.util

    path = Path(__file__).resolve().parents[1] / "scripts" / "rl_table.py"
    spec = importlib.util.spec_from_file_location("rl_table", path)
    rl_table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(rl_table)

    def document(correct: dict[str, int]) -> dict:
        return {"options": {"samples": 2, "levels": [1, 2]}, "programs": [
            {"hash": h, "level": 1 if h < "c" else 2, "samples": 2, "valid": 2, "correct": c} for h, c in correct.items()
        ]}

    # "before" reached a third program the other stopped short of: it is left out of both rows
    text = rl_table.table({"before": document({"a": 1, "b": 2, "c": 0}), "after": document({"a": 2, "b": 2})})
    assert text.startswith("Programs every evaluation reached: 2; k = 2.")
    assert "| before | 1 | 2 | 1.000 | 0.750 | 1.000 |" in text
    assert "| after | 1 | 2 | 1.000 | 1.000 | 1.000 |" in text
    assert "| before | 2 | 0 | - |" in text


def test_a_script_answer_is_judged_as_the_product_writes_it_back_replay_and_guards_included():
    program = level5_program(1)
    guards = [{"kind": "training", "name": "uniform"}, {"kind": "tensor", "name": "x", "dtype": "float32", "shape": [None, 7]}]
    steps = "\n".join(line for line in capture_of_record(program).program.schedule.splitlines() if line != "replay cuda_graph")
    answer = formats.script_completion(steps)
    assert len(steps.splitlines()) >= 4  # enough steps for the default schedule to replay them

    written, problem = evaluation.module_of(answer, capture_of_record(RlProgram(**{**asdict(program), "guards": guards})), "script")
    assert problem == "" and declares_replay(written) and "@drtriton_dispatch(" in written and "'x'" in written
    assert written.rstrip().endswith("ModelNew = Model")  # the written-back Model itself is what is judged

    # a programs.jsonl written before guards were kept: the plain ModelNew, as then
    older = {key: value for key, value in asdict(program).items() if key != "guards"}
    plain, problem = evaluation.module_of(answer, capture_of_record(_program_from_json(json.loads(json.dumps(older)))), "script")
    assert problem == "" and not declares_replay(plain) and "drtriton_dispatch" not in plain and "class ModelNew" in plain
