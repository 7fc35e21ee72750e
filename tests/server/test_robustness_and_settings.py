"""What users hit while typing and configuring: syntax errors, huge files, non-file documents, missing inputs.

Also a killed analysis process, and invalid settings pushed or pulled: each a clear message, never a crash.
"""

from __future__ import annotations

import dataclasses
import json

import psutil
import pytest
from lsp_helpers import TEST_SETTINGS, change_file, code_lenses, execute, open_file, wait_until
from lsprotocol import types

from drtriton_lsp.models.settings import ModelSettings

DEFAULT_MODEL = dataclasses.asdict(ModelSettings())

pytestmark = pytest.mark.asyncio

SECOND_TARGET = '''

class Shift(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x - 1.0
'''

WITHOUT_INPUTS = """import torch
import torch.nn as nn


class Gate(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x) * x
"""


def lens_places(lenses: list[types.CodeLens]) -> list[tuple[int, str]]:
    return [(lens.range.start.line, lens.command.title) for lens in lenses]


async def test_syntax_error_mid_typing_keeps_lenses_in_place_and_the_server_keeps_serving(client, example_file):
    path = example_file()
    text = path.read_text() + SECOND_TARGET
    uri = open_file(client, path, text)
    both = [(12, "Generate Triton kernel"), (32, "Generate Triton kernel")]
    assert lens_places(await code_lenses(client, uri)) == both

    broken = text.replace("def forward(self, x", "def forward(self, x(", 1)  # in ScaledActivation
    change_file(client, uri, 2, broken)
    answer = await execute(client, "drtriton.generate", {"uri": uri, "target": "ScaledActivation"})
    assert answer == {
        "status": "refused",
        "message": f"{path} has a syntax error at line 19, column 24: invalid syntax. Fix the syntax error at "
        "`def forward(self, x(: torch.Tensor) -> torch.Tensor:` (line 19), then run again.",
    }
    # The analysis of the broken text failed; the last one that parsed stands in, so lenses do not jump.
    assert lens_places(await code_lenses(client, uri)) == both

    change_file(client, uri, 3, broken.replace("\n\nclass Shift", "\n\n\n\nclass Shift"))
    assert lens_places(await code_lenses(client, uri)) == [both[0], (34, "Generate Triton kernel")]
    change_file(client, uri, 4, text)
    answer = await execute(client, "drtriton.generate", {"uri": uri, "target": "Nowhere"})
    assert answer["message"] == "no target named Nowhere in this file (targets: ScaledActivation, Shift)"


async def test_huge_file_is_reported_once_and_the_server_keeps_serving(client, example_file, tmp_path):
    huge = tmp_path / "generated_tables.py"
    text = "TABLE = [\n" + "    1.0,\n" * 230_000 + "]\n"
    huge.write_text(text)
    huge_uri = open_file(client, huge)
    assert await code_lenses(client, huge_uri) == []
    message = (
        f"{huge} has {len(text):,} characters; drtriton analyses files up to 2,000,000, so it shows nothing for "
        f"this one. Move the model you want optimized into a file of its own."
    )
    answer = await execute(client, "drtriton.generate", {"uri": huge_uri, "target": "TABLE"})
    assert answer == {"status": "refused", "message": message}
    change_file(client, huge_uri, 2, text + "# one more line\n")
    assert await code_lenses(client, huge_uri) == []

    small_uri = open_file(client, example_file())
    assert len(await code_lenses(client, small_uri)) == 1
    warnings = [m.message for m in client.messages if m.type == types.MessageType.Warning]
    assert warnings[0] == f"drtriton: {message}"  # said once; the refusal repeats it, as refusals do
    assert warnings[1:] == [f"drtriton: {answer['message']}"]


async def test_untitled_document_gets_lenses_but_no_job(client, example_file):
    uri = "untitled:Untitled-1"
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=example_file().read_text())
        )
    )
    assert len(await code_lenses(client, uri)) == 1
    answer = await execute(client, "drtriton.generate", {"uri": uri, "target": "ScaledActivation"})
    assert answer == {"status": "refused", "message": f"drtriton runs jobs on files on disk, and {uri} is not one; save it as a .py file first"}


async def test_generate_without_example_inputs_is_refused_with_the_fix_named(client, tmp_path):
    path = tmp_path / "gate.py"
    path.write_text(WITHOUT_INPUTS)
    uri = open_file(client, path)
    answer = await execute(client, "drtriton.generate", {"uri": uri, "target": "Gate"})
    assert answer == {
        "status": "refused",
        "message": "Gate has no example inputs. Use the quick fix 'drtriton: Add example-input pragma' on Gate, then fill it in.",
    }
    assert [lens.command.title for lens in await code_lenses(client, uri)] == ["Generate Triton kernel"]


async def test_killed_analysis_process_is_replaced(client, example_file):
    path = example_file()
    uri = open_file(client, path)
    assert len(await code_lenses(client, uri)) == 1
    (analysis_process,) = [
        process
        for process in psutil.Process(client._server.pid).children()
        if "spawn_main" in " ".join(process.cmdline())
    ]
    analysis_process.kill()
    analysis_process.wait(10)

    change_file(client, uri, 2, path.read_text() + SECOND_TARGET)
    answer = await execute(client, "drtriton.generate", {"uri": uri, "target": "Nowhere"})
    assert answer["message"] == "no target named Nowhere in this file (targets: ScaledActivation, Shift)"
    assert len(await code_lenses(client, uri)) == 2


async def test_invalid_settings_are_reported_once_and_replaced_by_defaults(client):
    bad = {"drtriton": {"trials": 0, "onSave": "sometimes", "colour": "blue", "remote": "gpu-box"}}
    for _ in range(2):
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=bad))
    await wait_until(lambda: len(client.messages) >= 4, 5, "the settings warnings")
    assert sorted(message.message for message in client.messages) == [
        "drtriton: drtriton setting onSave = 'sometimes' is not one of off, hint, search; using 'hint'",
        "drtriton: drtriton setting remote = 'gpu-box' does not start with ssh://; using ''",
        "drtriton: drtriton setting trials = 0 is below the minimum 1; using 5",
        "drtriton: unknown drtriton setting 'colour' (known: device, remote, remotePython, onSave, trials, warmWorker, "
        "writeTests, writeBack, model); ignored",
    ]


@pytest.mark.slow  # printDebugInformation asks a worker what it sees (it imports torch)
async def test_settings_pulled_with_workspace_configuration(client):
    """An editor that keeps settings itself (VS Code, Neovim's `settings`) answers `workspace/configuration`
    when the server asks, which it does when told the configuration changed without the new values."""
    client.set_configuration({"onSave": "search", "trials": "many"}, section="drtriton")
    for _ in range(2):
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    client.set_configuration({"onSave": "search", "trials": "many", "device": "tpu"}, section="drtriton")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=None))
    await wait_until(lambda: len(client.messages) >= 2, 10, "the settings warnings")

    information = json.loads(await execute(client, "drtriton.printDebugInformation"))
    assert [message.message for message in client.messages] == [
        "drtriton: drtriton setting trials = 'many' is not a whole number; using 5",
        "drtriton: drtriton setting device = 'tpu' is not one of auto, cpu, cuda; using 'auto'",
    ]
    # initializationOptions first, then the pulled section; a rejected value falls back to its default.
    assert information["settings"] == {
        **TEST_SETTINGS, "remote": "", "remotePython": "python3", "onSave": "search", "trials": 5, "device": "auto",
        "writeTests": False, "writeBack": "inline", "model": DEFAULT_MODEL,
    }  # fmt: skip
