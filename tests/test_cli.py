"""The `drtriton` command end to end: each example is verified on the CPU, --write keeps the file
runnable and changes only the target, and bad input exits 2 with a message that says what to do.

Each test runs the real command in a subprocess (workers and all).
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console
from rich.text import Text

from drtriton_lsp import cli
from tests.conftest import EXAMPLES, FIXTURES

EXAMPLE_FILES = sorted(p.name for p in EXAMPLES.glob("*.py"))


def drtriton(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "drtriton_lsp.cli", *args], capture_output=True, text=True, cwd=cwd, timeout=900
    )


@pytest.mark.slow
@pytest.mark.parametrize("example", EXAMPLE_FILES)
def test_every_example_is_verified_on_the_cpu_with_an_honest_report(example, example_copy, tmp_path):
    path = example_copy(example)
    report_path = tmp_path / "report.json"
    finished = drtriton("optimize", str(path), "--device", "cpu", "--trials", "2", "--json", str(report_path))
    assert finished.returncode == 0, finished.stderr
    report = json.loads(report_path.read_text())
    assert report["schema"] == "drtriton.report/1"
    assert report["status"] == "verified"
    assert report["device"]["kind"] == "cpu-interpreter"
    assert report["timing"] is None and "no GPU" in report["timing_note"]
    assert report["replaced_ops"], "something must run in Triton"
    assert report["correctness"]["interpreter"] is True
    assert report["correctness"]["passed"] == report["correctness"]["trials"] >= 2
    assert "@triton.jit" in report["kernel"]["source"]
    assert "verified" in finished.stderr and "no speed measured" in finished.stderr
    stages = report["search"]["stages_s"]
    assert list(stages) == ["extract", "capture", "generate", "verify"]  # no benchmark without a GPU
    assert 0 < sum(stages.values()) <= report["search"]["first_verified_s"] + 0.05  # each rounded to 0.01 s


@pytest.mark.slow
def test_write_changes_only_the_target_and_the_file_still_runs(example_copy):
    path = example_copy("mlp_block.py")
    original = path.read_text()
    finished = drtriton("optimize", str(path), "--device", "cpu", "--trials", "2", "--write")
    assert finished.returncode == 0, finished.stderr
    written = path.read_text()
    assert written != original
    assert _without_insertions(written.splitlines(), original.splitlines()) == original.splitlines()
    assert "@drtriton_dispatch(" in written and "# >>> drtriton" in written

    check = (
        "import torch, importlib.util, sys\n"
        "spec = importlib.util.spec_from_file_location('written', sys.argv[1])\n"
        "m = importlib.util.module_from_spec(spec); spec.loader.exec_module(m)\n"
        "torch.manual_seed(0); block = m.MLPBlock(64, 2).eval(); x = torch.randn(5, 64)\n"
        "with torch.no_grad():\n"
        "    routed = block(x)\n"
        "    reference = m.MLPBlock.forward.reference(block, x)\n"
        "torch.testing.assert_close(routed, reference, rtol=1e-4, atol=1e-4)\n"
        "grad_output = block(x.requires_grad_())\n"
        "grad_output.sum().backward()\n"
        "print('ok', x.grad is not None)\n"
    )
    plain = subprocess.run([sys.executable, "-c", check, str(path)], capture_output=True, text=True)
    assert plain.returncode == 0 and "ok True" in plain.stdout, plain.stderr
    interpreted = subprocess.run(
        [sys.executable, "-c", check, str(path)],
        capture_output=True,
        text=True,
        env={**os.environ, "TRITON_INTERPRET": "1"},
    )
    assert interpreted.returncode == 0 and "ok True" in interpreted.stdout, interpreted.stderr


def _without_insertions(new_lines: list[str], old_lines: list[str]) -> list[str]:
    """Keep the new lines that match the old ones in order: the original must come back whole."""
    kept, position = [], 0
    for line in new_lines:
        if position < len(old_lines) and line == old_lines[position]:
            kept.append(line)
            position += 1
    return kept


def test_a_syntax_error_is_reported_with_its_line(tmp_path):
    path = tmp_path / "broken.py"
    path.write_text("import torch\n\nclass Broken(torch.nn.Module:\n    pass\n")
    finished = drtriton("optimize", str(path))
    assert finished.returncode == 2
    assert "line 3" in finished.stderr or "broken.py:3" in finished.stderr


def test_missing_example_inputs_say_exactly_what_to_add(tmp_path):
    path = tmp_path / "no_inputs.py"
    path.write_text("import torch\n\n\nclass Gate(torch.nn.Module):\n    def forward(self, x):\n        return torch.sigmoid(x) * x\n")
    finished = drtriton("optimize", str(path))
    assert finished.returncode == 2
    assert "# drtriton: inputs = [" in finished.stderr and "Gate" in finished.stderr


@pytest.mark.slow
def test_untraceable_code_names_the_users_line(tmp_path):
    path = tmp_path / "branchy.py"
    path.write_text(
        "import torch\n\n\n# drtriton: inputs = [torch.randn(8)]\nclass Branchy(torch.nn.Module):\n"
        "    def forward(self, x):\n        if x.sum() > 0:\n            return torch.relu(x)\n        return x\n"
    )
    finished = drtriton("optimize", str(path))
    assert finished.returncode == 2
    assert "branchy.py:7" in finished.stderr.replace("\n", ""), finished.stderr


def test_an_unknown_target_lists_the_real_ones(example_copy):
    finished = drtriton("optimize", str(example_copy("mlp_block.py")), "--target", "Nope")
    assert finished.returncode == 2 and "MLPBlock" in finished.stderr


@pytest.mark.parametrize(
    ("options", "says"),
    [
        (["--gpus", "2"], "--search is missing"),
        (["--gpus", "2", "--search", "--remote", "ssh://gpu-box"], "leave out --gpus with --remote"),
        (["--gpus", "2", "--search", "--device", "cpu"], "--gpus 2 needs CUDA GPUs"),
    ],
)
def test_a_search_over_gpus_it_cannot_have_is_refused_with_what_to_do(example_copy, options, says):
    finished = drtriton("optimize", str(example_copy("mlp_block.py")), *options)
    assert finished.returncode == 2 and says in " ".join(finished.stderr.split())


@pytest.mark.slow
def test_asking_for_cuda_without_a_gpu_is_bad_input(example_copy):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    finished = drtriton("optimize", str(example_copy("scaled_activation_chain.py")), "--device", "cuda")
    assert finished.returncode == 2 and "--device cpu" in finished.stderr


@pytest.mark.slow
def test_verify_command_passes_a_good_candidate_and_rejects_a_bad_one(tmp_path):
    task = str(FIXTURES / "verify" / "task_scale_relu.py")
    good = drtriton("verify", task, str(FIXTURES / "verify" / "good.py"), "--trials", "2", "--json", str(tmp_path / "r.json"))
    assert good.returncode == 0, good.stderr
    assert json.loads((tmp_path / "r.json").read_text())["status"] == "verified"
    bad = drtriton("verify", task, str(FIXTURES / "verify" / "wrong_result.py"), "--trials", "2")
    assert bad.returncode == 1 and "differ from the reference" in bad.stderr


@pytest.mark.slow
def test_ctrl_c_stops_the_worker_and_writes_nothing(example_copy):
    import signal
    import time

    import psutil

    path = example_copy("mlp_block.py")
    original = path.read_text()
    process = subprocess.Popen(
        [sys.executable, "-m", "drtriton_lsp.cli", "optimize", str(path), "--write"],
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    workers = []
    deadline = time.monotonic() + 60
    while not workers and time.monotonic() < deadline:  # wait until a worker is running
        time.sleep(0.5)
        workers = psutil.Process(process.pid).children(recursive=True)
    assert workers, "no worker process was started"
    process.send_signal(signal.SIGINT)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    assert "nothing written" in stderr
    assert path.read_text() == original
    gone, alive = psutil.wait_procs(workers, timeout=10)
    assert not alive, "a worker outlived the interrupted command"


@pytest.mark.slow
def test_one_untraceable_target_does_not_stop_the_others(tmp_path):
    path = tmp_path / "two.py"
    path.write_text(
        "import torch\n\n\n# drtriton: inputs = [torch.randn(64, 32)]\nclass Good(torch.nn.Module):\n"
        "    def forward(self, x):\n        return torch.sigmoid(x) * x + 1.0\n\n\n"
        "# drtriton: inputs = [torch.randn(8)]\nclass Branchy(torch.nn.Module):\n"
        "    def forward(self, x):\n        if x.sum() > 0:\n            return torch.relu(x)\n        return x\n"
    )
    finished = drtriton("optimize", str(path), "--trials", "2", "--json", str(tmp_path / "r.json"))
    assert finished.returncode == 1
    reports = {r["target"]: r for r in json.loads((tmp_path / "r.json").read_text())}
    assert reports["Good"]["status"] == "verified"
    assert reports["Branchy"]["status"] == "error" and "two.py:13" in reports["Branchy"]["message"]


@pytest.mark.slow
def test_a_schedule_script_is_decoded_and_a_bad_one_names_its_line(example_copy, tmp_path):
    path = example_copy("scaled_activation_chain.py")
    report_path = tmp_path / "report.json"
    first = drtriton("optimize", str(path), "--device", "cpu", "--trials", "1", "--json", str(report_path))
    assert first.returncode == 0, first.stderr
    default_script = json.loads(report_path.read_text())["kernel"]["schedule"]
    assert "block=1024 warps=4" in default_script

    tuned = tmp_path / "tuned.schedule"
    tuned.write_text(default_script.replace("block=1024 warps=4", "block=256 warps=2"))
    second = drtriton(
        "optimize", str(path), "--device", "cpu", "--trials", "1", "--target", "ScaledActivation",
        "--schedule", str(tuned), "--json", str(report_path),
    )
    assert second.returncode == 0, second.stderr
    report = json.loads(report_path.read_text())
    assert report["status"] == "verified" and report["kernel"]["schedule"] == tuned.read_text()
    assert "BLOCK = 256" in report["kernel"]["source"]

    broken = tmp_path / "broken.schedule"
    broken.write_text(default_script.replace("block=1024", "block=1000"))
    third = drtriton("optimize", str(path), "--device", "cpu", "--target", "ScaledActivation", "--schedule", str(broken))
    assert third.returncode == 2
    assert "line 1: kernel pointwise, parameter block: expected a power of two" in third.stderr


def test_without_a_terminal_progress_is_one_line_per_new_message():
    output = io.StringIO()
    console = Console(file=output, force_terminal=False)
    with cli.progress_display(console, "checking the worker's devices") as status:
        status.update("checking the worker's devices")  # the same message again: not printed twice
        status.update(Text.assemble(("MLPBlock", "bold"), ": verifying"))
    lines = output.getvalue().splitlines()
    assert [line.split("] ", 1)[1] for line in lines] == ["checking the worker's devices", "MLPBlock: verifying"]
    assert all(line.startswith("[") and " s] " in line for line in lines)
