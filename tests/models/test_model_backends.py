"""Model backends and model-driven search with real tiny models, a real OpenAI-compatible server and the real verifier:
bad answers, a dead or slow server and a cancel are the real thing, never mocks.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import regex
from tiny_models import HYPOT, HYPOT_KERNEL, build_tiny_model

from drtriton_lsp import cli
from drtriton_lsp.bench.suite_report import model_winners_text
from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.engine.model_search import CandidateBuilder, WorkerModelMeasurer, run_model_search
from drtriton_lsp.engine.session import WorkerLimits, WorkerSession
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.models import formats
from drtriton_lsp.models.answer_cache import ANSWERS_FOLDER, CachingBackend
from drtriton_lsp.models.backends import (
    CheckpointBackend,
    ModelUnavailable,
    OpenAIBackend,
    Sampling,
    backend_status,
    open_backend,
)
from drtriton_lsp.models.script_grammar import ScriptConstraint, ScriptGrammar, answer_pattern, script_constraint
from drtriton_lsp.models.settings import ModelSettings, parse_model_settings
from drtriton_lsp.runners.local import JobLimits, LocalRunner
from drtriton_lsp.server.jobs import _engine_options
from drtriton_lsp.server.settings import Settings
from drtriton_lsp.source.extract import extract_task
from drtriton_lsp.task import Task

SERVER = Path(__file__).resolve().parent / "openai_server.py"
REPO = Path(__file__).resolve().parents[2]
ADD_RELU = """import torch
from torch import nn


class AddRelu(nn.Module):
    def forward(self, x, y):
        return torch.relu(x + y)


def get_inputs():
    return [torch.randn(8, 32), torch.randn(8, 32)]


def get_init_inputs():
    return []
"""
# A kernel writer's answer that parses and launches Triton, but computes relu(x - y): the verifier must reject it.
WRONG_KERNEL = """import torch
import triton
import triton.language as tl


@triton.jit
def add_relu_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, tl.maximum(x - y, 0.0), mask=mask)


class ModelNew(torch.nn.Module):
    def forward(self, x, y):
        x, y = x.contiguous(), y.contiguous()
        out = torch.empty_like(x)
        n = x.numel()
        add_relu_kernel[(triton.cdiv(n, 1024),)](x, y, out, n, BLOCK=1024)
        return out
"""
VALID_SCRIPT = "kernel pointwise add,relu block=256 warps=4\n"


class Example:
    """The AddRelu target: its file, task, captured graph, and the two first prompts a model gets for it."""

    def __init__(self, directory: Path):
        self.path = directory / "add_relu.py"
        self.path.write_text(ADD_RELU)
        self.task: Task = extract_task(ADD_RELU, "AddRelu", str(self.path))
        with LocalRunner() as runner:
            self.graph = OpGraph.from_json(runner.call("capture", {"task": self.task.to_json()})["graph"])
        self.kernel_prompt = formats.kernel_prompt(self.task.source)
        self.script_prompt = formats.script_prompt(self.graph)

    def builder(self) -> CandidateBuilder:
        return CandidateBuilder(self.task, self.graph, [], "add_relu", ["x", "y"])


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Example:
    return Example(tmp_path_factory.mktemp("example"))


@pytest.fixture(scope="module")
def answering_model(example, tmp_path_factory) -> Path:
    """Answers the kernel prompt with WRONG_KERNEL and the script prompt with VALID_SCRIPT."""
    answers = {example.kernel_prompt: WRONG_KERNEL, example.script_prompt: VALID_SCRIPT}
    return build_tiny_model(tmp_path_factory.mktemp("answering"), answers)


@pytest.fixture(scope="module")
def noise_model(example, tmp_path_factory) -> Path:
    """An untrained model: its answers are token noise, a short context's worth (generating is the slow part)."""
    answers = {example.kernel_prompt: "", example.script_prompt: ""}
    return build_tiny_model(tmp_path_factory.mktemp("noise"), answers, steps=0, context=200)


@pytest.fixture(scope="module")
def server():
    """Start tests/models/openai_server.py on a checkpoint (once per checkpoint and options: a server that dies or
    lags is asked for once); returns its base URL. Every server is stopped (if alive) after the module."""
    started: list[subprocess.Popen] = []
    urls: dict[tuple, str] = {}

    def start(checkpoint: Path, *options: str) -> str:
        if (checkpoint, options) not in urls:
            urls[(checkpoint, options)] = launch(checkpoint, *options)
        return urls[(checkpoint, options)]

    def launch(checkpoint: Path, *options: str) -> str:
        process = subprocess.Popen(
            [sys.executable, str(SERVER), str(checkpoint), *options], stdout=subprocess.PIPE, text=True,
            env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        )
        started.append(process)
        port = process.stdout.readline().strip()
        assert port.isdigit(), f"the test server did not start (exit {process.poll()})"
        return f"http://127.0.0.1:{port}/v1"

    yield start
    for process in started:
        process.kill()
        process.wait()


def expected(answer: str) -> str:
    return formats.kernel_completion(answer)


@pytest.mark.slow  # a worker or a server process loads a model
def test_transformers_backend_samples_the_checkpoint_in_a_worker(example, answering_model):
    with LocalRunner() as runner:
        backend = CheckpointBackend(str(answering_model), runner=runner)
        answers = backend.complete([example.kernel_prompt, example.script_prompt], Sampling(2, temperature=0.8))
    assert answers == [[expected(WRONG_KERNEL)] * 2, [expected(VALID_SCRIPT)] * 2]
    assert backend.checkpoint.startswith("sha256:") and backend.model == str(answering_model.resolve())


@pytest.mark.slow  # a worker or a server process loads a model
def test_openai_backend_samples_from_a_real_server(example, answering_model, server):
    backend = OpenAIBackend(server(answering_model))
    assert backend.problem() == ""
    answers = backend.complete([example.kernel_prompt, example.script_prompt], Sampling(3, temperature=0.8))
    # the server stops at the end line, as vLLM does with `stop`: the parser reads the answer without it
    assert answers == [[WRONG_KERNEL] * 3, [VALID_SCRIPT] * 3]
    assert backend.model == answering_model.name


@pytest.mark.slow  # a worker or a server process loads a model
def test_noise_is_rejected_with_the_parsers_message_and_fed_back_for_a_turn(example, noise_model, server):
    settings = ModelSettings(backend="openai", endpoint=server(noise_model), kind="both", samples=1, turns=1)
    with LocalRunner() as runner:
        backend = open_backend(settings, runner)
        measure = WorkerModelMeasurer(
            example.task, WorkerSession(runner, limits=WorkerLimits(verify=JobLimits(), benchmark=JobLimits())),
            device="cpu", trials=2, input_shapes=None, parallel=1, compiler_candidate=None,
        )
        search = run_model_search(backend, settings, example.builder(), measure, seconds=600)
    assert search.stopped == "" and search.verified == 0
    assert [(c.origin.kind, c.origin.turn) for c in search.candidates] == [
        ("kernel", 0), ("script", 0), ("kernel", 1), ("script", 1)
    ]
    for candidate in search.candidates:
        prefix = "malformed answer: " if candidate.origin.kind == "kernel" else "invalid script: "
        assert candidate.reason.startswith(prefix) and candidate.source is None
    summary = search.summary().to_json()
    assert summary["answers"] == 4 and summary["rejections"] and summary["backend"] == "openai"


@pytest.mark.slow  # a worker or a server process loads a model
def test_script_answers_are_held_to_the_grammar_in_the_worker_and_by_a_server_with_structured_outputs(
    example, noise_model, server
):
    constraint = script_constraint(example.graph)
    grammar = ScriptGrammar(constraint)
    sampling = Sampling(2, temperature=1.0, max_tokens=48)
    with LocalRunner() as runner:
        free, held = CheckpointBackend(str(noise_model), runner=runner).complete(
            [example.script_prompt] * 2, sampling, constraints=[None, constraint]
        )
    served_by = OpenAIBackend(server(noise_model))
    (served,) = served_by.complete([example.script_prompt], sampling, constraints=[constraint])
    assert not any(grammar.allows("", answer) for answer in free)  # an untrained model writes noise when free
    for answer in held:
        assert answer.startswith(("kernel ", "keep ")) and grammar.allows("", answer), answer
    # the server holds answers to the regular expression alone (it cannot say "each op once in a kernel")
    pattern = regex.compile(answer_pattern(constraint.line))
    for answer in served:
        assert answer.startswith(("kernel ", "keep ")) and pattern.fullmatch(answer, partial=True), answer
    assert served_by.unconstrained == ""


@pytest.mark.slow  # a worker or a server process loads a model
def test_a_server_without_structured_outputs_is_asked_again_without_and_the_report_says_so(
    example, noise_model, server
):
    settings = ModelSettings(backend="openai", endpoint=server(noise_model, "--no-structured-outputs"), kind="script",
                             samples=2, turns=0)
    search = run_model_search(
        open_backend(settings, None), settings, example.builder(), lambda candidates, stop: None, seconds=600
    )
    assert search.stopped == "" and len(search.candidates) == 2
    summary = search.summary().to_json()
    assert summary["constrained"] is False
    assert "refused structured outputs" in summary["unconstrained"]
    assert "Unrecognized request argument supplied: structured_outputs" in summary["unconstrained"]
    report = {"search": {"model": summary, "candidates_by_source": {"model": 2}}}
    assert "script answers unconstrained" in to_markdown_rows(report)


def to_markdown_rows(report: dict) -> str:
    from drtriton_lsp.engine.report import _source_rows

    return "\n".join(f"{name}: {value}" for name, value in _source_rows(report["search"]))


@pytest.mark.slow  # a worker or a server process loads a model
def test_a_server_that_dies_mid_job_ends_the_model_search_with_what_it_answered(example, noise_model, server):
    settings = ModelSettings(backend="openai", endpoint=server(noise_model, "--die-after", "1"), kind="script",
                             samples=2, turns=3, constrained=False)  # free noise: answered well inside the timeout
    backend = OpenAIBackend(settings.endpoint, timeout_s=5, retries=1)
    search = run_model_search(backend, settings, example.builder(), lambda candidates, stop: None, seconds=600)
    assert [candidate.origin.turn for candidate in search.candidates] == [0, 0]
    assert search.stopped == "unavailable"
    assert "did not answer" in search.problem and "2 tries" in search.problem


@pytest.mark.slow  # a worker or a server process loads a model
def test_a_slow_server_times_out_and_a_cancel_ends_sampling_at_once(example, noise_model, server):
    endpoint = server(noise_model, "--delay", "30")
    slow = OpenAIBackend(endpoint, timeout_s=1, retries=0)
    with pytest.raises(ModelUnavailable, match="timed out after 1 s"):
        slow.complete([example.kernel_prompt], Sampling(1))

    settings = ModelSettings(backend="openai", endpoint=endpoint, kind="kernel", samples=1, turns=0)
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    started = time.monotonic()
    search = run_model_search(OpenAIBackend(endpoint, timeout_s=60), settings, example.builder(),
                              lambda candidates, stop: None, seconds=600, cancel=cancel)
    assert search.stopped == "cancelled" and search.candidates == []
    assert time.monotonic() - started < 10

    # the search's budget ends sampling the same way, and the report says it was the budget
    started = time.monotonic()
    search = run_model_search(OpenAIBackend(endpoint, timeout_s=60), settings, example.builder(),
                              lambda candidates, stop: None, seconds=2)
    assert search.stopped == "budget" and search.candidates == []
    assert time.monotonic() - started < 10


def test_a_backend_that_cannot_work_says_what_to_set():
    with pytest.raises(ModelUnavailable, match="drtriton.model.endpoint"):
        open_backend(ModelSettings(backend="openai"), runner=None)
    with pytest.raises(ModelUnavailable, match="the vllm backend needs drtriton.model.path"):
        open_backend(ModelSettings(backend="vllm"), runner=None)
    down = OpenAIBackend("http://127.0.0.1:9", retries=0)
    assert down.base_url == "http://127.0.0.1:9/v1"
    assert down.problem().startswith("the model server at http://127.0.0.1:9/v1/models did not answer")


@pytest.mark.slow
def test_optimize_with_a_local_checkpoint_verifies_the_models_answers_beside_the_compiler(
    example, answering_model, tmp_path
):
    report_path = tmp_path / "report.json"
    status = cli.main([
        "optimize", str(example.path), "--device", "cpu", "--trials", "2", "--search-seconds", "900", "--model", str(answering_model),
        "--model-kind", "both", "--samples", "2", "--turns", "1", "--json", str(report_path),
    ])
    report = json.loads(report_path.read_text())
    assert status == cli.EXIT_OK and report["status"] == "verified"
    search = report["search"]
    model = search["model"]
    # 2 kernel answers rejected and fed back (2 more), 2 valid scripts verified (untimed on CPU: not refined)
    assert search["candidates_by_source"] == {"compiler": 1, "model": 6}
    assert model["verified"] == 2 and model["backend"] == "transformers" and model["checkpoint"].startswith("sha256:")
    assert any(entry["reason"].startswith("rejected by the verifier") for entry in model["rejections"])
    # without a GPU nothing is timed, so the compiler's verified kernel stays
    assert search["winner"] == {"source": "compiler"}


@pytest.mark.slow
def test_a_local_checkpoints_answers_are_kept_and_a_repeated_request_is_answered_from_them(example, answering_model,
                                                                                            tmp_path):
    """The same optimize twice with one cache: the second asks the model nothing, and its answers are verified anew."""
    cache = tmp_path / "cache"
    reports = []
    for run in ("first", "again"):
        report_path = tmp_path / f"{run}.json"
        assert cli.main([
            "optimize", str(example.path), "--device", "cpu", "--trials", "2", "--search-seconds", "900", "--model", str(answering_model),
            "--model-kind", "both", "--samples", "2", "--turns", "1", "--search-cache", str(cache),
            "--json", str(report_path),
        ]) == cli.EXIT_OK
        reports.append(json.loads(report_path.read_text())["search"])
    first, again = reports
    assert "cached" not in first["model"] or first["model"]["cached"] == 0
    assert again["model"]["cached"] == 2  # both turns' requests
    for key in ("candidates_by_source", "winner"):
        assert again[key] == first[key]
    assert again["model"]["verified"] == first["model"]["verified"] == 2
    assert len(list((cache / ANSWERS_FOLDER).glob("*.json"))) == 2


class CountingBackend:
    """A backend that answers every prompt with its text reversed and counts the requests it was asked."""

    name, model, checkpoint, unconstrained = "transformers", "/m", "sha256:0", ""

    def __init__(self):
        self.requests = 0

    def problem(self) -> str:
        return ""

    def complete(self, prompts, sampling, cancel=None, constraints=None):
        self.requests += 1
        return [[prompt[::-1]] * sampling.samples for prompt in prompts]


class ScriptWriter:
    """A backend whose every answer is VALID_SCRIPT, at once: what follows sampling is what a test then sees."""

    name, model, checkpoint, unconstrained = "transformers", "/m", "sha256:1", ""

    def problem(self) -> str:
        return ""

    def complete(self, prompts, sampling, cancel=None, constraints=None):
        return [[formats.script_completion(VALID_SCRIPT)] * sampling.samples for _prompt in prompts]


def test_the_budget_stops_verification_in_flight_and_the_unjudged_answers_say_so(example):
    settings = ModelSettings(backend="transformers", path="/m", kind="script", samples=2, turns=1)
    with LocalRunner() as runner:
        measure = WorkerModelMeasurer(
            example.task, WorkerSession(runner, limits=WorkerLimits(verify=JobLimits(), benchmark=JobLimits())),
            device="cpu", trials=2, input_shapes=None, parallel=1, compiler_candidate=None,
        )
        started = time.monotonic()
        # a worker starting and importing torch alone takes longer than this budget
        search = run_model_search(ScriptWriter(), settings, example.builder(), measure, seconds=1.0)
        elapsed = time.monotonic() - started
    assert search.stopped == "budget" and elapsed < 8
    assert len(search.candidates) == 2 and search.verified == 0
    assert all(candidate.verdict is None for candidate in search.candidates)
    assert {candidate.reason for candidate in search.candidates} == {"not judged: the search's 1 s ran out first"}
    summary = search.summary().to_json()
    assert summary["stopped"] == "budget"
    report = {"search": {"model": summary, "candidates_by_source": {"model": 2}}}
    assert "stopped: its time ran out; more time: --search-seconds" in to_markdown_rows(report)


def test_the_answer_cache_keys_everything_an_answer_depends_on_and_asks_again_for_a_damaged_entry(tmp_path):
    inner = CountingBackend()
    cached = CachingBackend(inner, tmp_path)
    assert cached.complete(["a", "b"], Sampling(2)) == [["a", "a"], ["b", "b"]]
    assert cached.complete(["a", "b"], Sampling(2)) == [["a", "a"], ["b", "b"]]
    assert (inner.requests, cached.answered_from_cache) == (1, 1)
    constraint = ScriptConstraint("(keep x)", ("x",))
    for different in (["a"], ["a", "c"]):
        cached.complete(different, Sampling(2))
    cached.complete(["a", "b"], Sampling(2, temperature=0.5))
    cached.complete(["a", "b"], Sampling(2, seed=1))
    cached.complete(["a", "b"], Sampling(2), constraints=[constraint, None])
    assert inner.requests == 6
    other_checkpoint = CachingBackend(CountingBackend(), tmp_path)
    other_checkpoint.checkpoint = "sha256:1"
    other_checkpoint.complete(["a", "b"], Sampling(2))
    assert other_checkpoint.backend.requests == 1
    for entry in tmp_path.glob("*.json"):
        entry.write_text("[")  # damaged: asked again, and kept anew
    assert cached.complete(["a", "b"], Sampling(2)) == [["a", "a"], ["b", "b"]] and inner.requests == 7
    assert cached.complete(["a", "b"], Sampling(2)) and inner.requests == 7


@pytest.mark.slow
def test_optimize_against_a_dead_server_gives_the_compilers_result_and_says_why(example, tmp_path):
    report_path = tmp_path / "report.json"
    status = cli.main([
        "optimize", str(example.path), "--device", "cpu", "--trials", "2", "--search-seconds", "900", "--model", "http://127.0.0.1:9/v1",
        "--json", str(report_path),
    ])
    report = json.loads(report_path.read_text())
    assert status == cli.EXIT_OK and report["status"] == "verified"
    assert report["search"]["winner"] == {"source": "compiler"}
    assert report["search"]["model"]["stopped"] == "unavailable"
    assert "did not answer" in report["search"]["model"]["problem"]


@pytest.mark.slow  # a worker or a server process loads a model
def test_debug_information_says_whether_the_model_answers(answering_model, server):
    assert backend_status(ModelSettings(backend="openai", endpoint=server(answering_model))) == {
        "backend": "openai", "model": answering_model.name, "answers": True, "problem": "",
    }
    local = backend_status(ModelSettings(backend="transformers", path=str(answering_model)))
    assert local["answers"] is True and local["model"] == str(answering_model.resolve())
    missing = backend_status(ModelSettings(backend="transformers", path=str(answering_model / "missing")))
    assert missing["answers"] is False and "no config.json" in missing["problem"]


def test_model_settings_reject_bad_values_and_the_cli_tells_a_url_from_a_checkpoint(tmp_path):
    raw = {"backend": "gpt", "samples": 0, "turns": 2, "colour": 1}
    settings, problems = parse_model_settings(raw, "drtriton.model")
    assert settings == ModelSettings(turns=2)
    assert problems == [
        "drtriton.model.backend = 'gpt' is not one of none, openai, transformers, vllm; using 'none'",
        "drtriton.model.samples = 0 is below the minimum 1; using 4",
        "unknown setting drtriton.model.colour (known: backend, endpoint, name, path, python, kind, samples, turns, "
        "constrained, apiKeyEnv, seconds, timeoutSeconds); ignored",
    ]
    parser = cli.build_parser()
    url = cli.model_settings(parser.parse_args(["optimize", "f.py", "--model", "http://h:8000/v1", "--turns", "3"]))
    assert (url.backend, url.endpoint, url.turns) == ("openai", "http://h:8000/v1", 3)
    local = cli.model_settings(parser.parse_args(["optimize", "f.py", "--model", str(tmp_path), "--samples", "2"]))
    assert (local.backend, local.path, local.samples) == ("transformers", str(tmp_path), 2)
    assert url.constrained and local.constrained
    engine = cli.model_settings(parser.parse_args(
        ["optimize", "f.py", "--model", str(tmp_path), "--model-engine", "vllm", "--model-python", "/opt/v/bin/python"]
    ))
    assert (engine.backend, engine.path, engine.python) == ("vllm", str(tmp_path), "/opt/v/bin/python")
    free = cli.model_settings(parser.parse_args(["optimize", "f.py", "--model", str(tmp_path), "--unconstrained"]))
    assert not free.constrained and free.seconds == 60
    timed = cli.model_settings(parser.parse_args(["optimize", "f.py", "--model", str(tmp_path), "--search-seconds", "7.4"]))
    assert timed.seconds == 7
    # the editor runs no schedule search: drtriton.model.seconds is the whole budget of a Generate's model part
    editor_settings, _problems = parse_model_settings({"backend": "openai", "endpoint": "http://h/v1", "seconds": 9},
                                                      "drtriton.model")
    options = _engine_options(dataclasses.replace(Settings(), model=editor_settings))
    assert options.search_budget.seconds == 9 and options.model.seconds == 9
    with pytest.raises(DrtritonError, match="neither a URL nor a directory"):
        cli.model_settings(parser.parse_args(["optimize", "f.py", "--model", str(tmp_path / "absent")]))



@pytest.mark.slow
def test_where_the_compiler_has_nothing_a_models_verified_kernel_wins_and_is_not_written_back(tmp_path, capsys):
    path = tmp_path / "hypot.py"
    path.write_text(HYPOT)
    prompt = formats.kernel_prompt(extract_task(HYPOT, "Hypot", str(path)).source)
    checkpoint = build_tiny_model(tmp_path / "hypot_model", {prompt: HYPOT_KERNEL})
    report_path = tmp_path / "report.json"
    status = cli.main([
        "optimize", str(path), "--device", "cpu", "--trials", "2", "--model", str(checkpoint), "--samples", "2",
        "--turns", "0", "--json", str(report_path), "--write",
    ])
    report = json.loads(report_path.read_text())
    assert status == cli.EXIT_OK and report["status"] == "verified"
    search = report["search"]
    assert search["candidates_by_source"] == {"compiler": 0, "model": 2}
    winner = search["winner"]
    assert (winner["source"], winner["kind"], winner["backend"], winner["turn"]) == ("model", "kernel", "transformers", 0)
    assert winner["checkpoint"].startswith("sha256:") and winner["sample"] in (0, 1)
    assert report["kernel"]["source"] == HYPOT_KERNEL and report["kernel"]["schedule"] is None
    assert "aten.hypot.default" not in report["kept_ops"]
    assert "write-back takes the compiler's programs" in " ".join(capsys.readouterr().err.split())
    assert path.read_text() == HYPOT


def test_bench_records_the_model_and_counts_the_kernels_it_won():
    args = cli.build_parser().parse_args(["bench", "problems", "--model", "http://h:8000/v1", "--samples", "2"])
    assert cli.bench_pipeline(args)["model"] == {
        "model": "http://h:8000/v1", "kind": "kernel", "samples": 2, "turns": 1, "constrained": True
    }
    assert cli.bench_options(args, "cuda").model.endpoint == "http://h:8000/v1"
    searches = [
        {"winner": {"source": "model"}, "candidates_by_source": {"compiler": 3, "model": 4}},
        {"winner": {"source": "compiler"}, "candidates_by_source": {"compiler": 1, "model": 4}},
    ]
    problems = [{"status": "verified", "report": {"search": search}} for search in searches]
    problems.append({"status": "error", "report": None})
    assert model_winners_text(problems) == (
        "model: 1 of 2 verified problems kept a model's kernel; candidates: 4 from the compiler, 8 from the model"
    )


def test_the_api_key_is_read_from_the_named_environment_variable_and_sent_as_a_bearer_token(monkeypatch):
    seen: list[str | None] = []

    class Models(BaseHTTPRequestHandler):
        def log_message(self, *_args) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(self.headers.get("Authorization"))
            body = json.dumps({"data": [{"id": "m"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    listener = ThreadingHTTPServer(("127.0.0.1", 0), Models)
    threading.Thread(target=listener.serve_forever, daemon=True).start()
    endpoint = f"http://127.0.0.1:{listener.server_address[1]}"
    try:
        monkeypatch.setenv("DRTRITON_TEST_KEY", "secret-1")
        assert OpenAIBackend(endpoint, api_key_env="DRTRITON_TEST_KEY").problem() == ""
        monkeypatch.delenv("DRTRITON_TEST_KEY")
        assert OpenAIBackend(endpoint, api_key_env="DRTRITON_TEST_KEY").problem() == ""
    finally:
        listener.shutdown()
    assert seen == ["Bearer secret-1", None]
