"""Syntax errors mid-typing, non-file documents, settings validation, and the on-save fusion hints."""

from __future__ import annotations

import pytest
from lsp_helpers import change_file, code_lenses, execute, open_file, wait_until
from lsprotocol import types

pytestmark = pytest.mark.asyncio


async def test_syntax_error_mid_typing_clears_lenses_and_the_server_keeps_serving(client, example_file):
    path = example_file()
    uri = open_file(client, path)
    assert [lens.command.title for lens in await code_lenses(client, uri)] == ["Generate Triton kernel"]

    change_file(client, uri, 2, path.read_text().replace("def forward(self, x", "def forward(self, x("))
    assert await code_lenses(client, uri) == []
    answer = await execute(client, "drtriton.generate", {"uri": uri, "target": "ScaledActivation"})
    assert answer["status"] == "refused" and "does not parse" in answer["message"]

    change_file(client, uri, 3, path.read_text())
    assert len(await code_lenses(client, uri)) == 1


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


async def test_invalid_settings_are_reported_once_and_replaced_by_defaults(client):
    bad = {"drtriton": {"trials": 0, "onSave": "sometimes", "colour": "blue"}}
    for _ in range(2):
        client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings=bad))
    await wait_until(lambda: len(client.messages) >= 3, 5, "the settings warnings")
    assert sorted(message.message for message in client.messages) == [
        "drtriton: drtriton setting onSave = 'sometimes' is not one of off, hint, search; using 'hint'",
        "drtriton: drtriton setting trials = 0 is below the minimum 1; using 5",
        "drtriton: unknown drtriton setting 'colour' (known: device, onSave, trials, writeBack); ignored",
    ]


async def test_save_publishes_fusion_hints(client, example_file):
    path = example_file()
    uri = open_file(client, path)
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))
    diagnostics = await wait_until(lambda: client.diagnostics.get(uri), 5, "hints")
    (hint,) = diagnostics
    assert hint.severity == types.DiagnosticSeverity.Hint
    assert hint.message.startswith("8 elementwise ops fusible into 1 kernel; est. 8x fewer bytes moved for this chain")
    assert (hint.range.start.line, hint.range.end.line) == (19, 21)
