"""drtriton.generate as a job: progress begin/report/end, lens, diagnostic, hover, report, apply; one job per target.
The verdict shows once on the target's line (the lens), with no inlay hint repeating it."""

from __future__ import annotations

import re

import pytest
from lsp_helpers import (
    change_file,
    code_lenses,
    document_edits,
    execute,
    open_file,
    wait_for_job_end,
    wait_until,
)
from lsprotocol import types

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


async def test_generate_verifies_and_apply_writes_one_versioned_edit(client, example_file):
    path = example_file()
    uri = open_file(client, path)
    target = {"uri": uri, "target": "ScaledActivation"}

    started = await execute(client, "drtriton.generate", target)
    assert started["status"] == "started"
    again = await execute(client, "drtriton.generate", target)
    assert again["status"] == "already running" and again["jobId"] == started["jobId"]
    lenses = await code_lenses(client, uri)
    assert [lens.command.title for lens in lenses] == ["drtriton: generating a kernel… (click to cancel)"]
    assert list(lenses[0].command.arguments) == [started["jobId"]]

    end = await wait_for_job_end(client, started["token"])
    progress = client.progress_reports[started["token"]]
    assert isinstance(progress[0], types.WorkDoneProgressBegin) and progress[0].cancellable
    steps = [report.message for report in progress if isinstance(report, types.WorkDoneProgressReport)]
    assert "capturing the graph (torch.export) in a worker" in steps
    assert end.message.startswith("ScaledActivation: verified")

    if client.editor == "visual-studio-code":  # refreshed at the start and the end of the job
        await wait_until(lambda: client.code_lens_refreshes >= 2, 5, "a code lens refresh")
    titles = [lens.command.title for lens in await code_lenses(client, uri)]
    assert titles == ["verified · no speed measured: no GPU", "Apply verified kernel"]
    (diagnostic,) = [d for d in client.diagnostics[uri] if d.severity == types.DiagnosticSeverity.Information]
    assert diagnostic.message == end.message
    assert client.initialize_result.capabilities.inlay_hint_provider is None  # nothing repeats the lens on the target's line
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(12, 8))
    )
    assert hover.contents.value.startswith("## drtriton report: `ScaledActivation`")
    report = await execute(client, "drtriton.showReport", target)
    assert "| trials passed |" in report["markdown"] and "| status | verified |" in report["markdown"]
    assert re.search(r"\| trials passed \| (\d+)/\1 \(\d+ primary, 1 strided, ", report["markdown"])
    assert "| True |" not in report["markdown"] and "| check: inputs_unchanged | passed: " in report["markdown"]
    assert report["uri"].endswith(f"/{path.stem}.ScaledActivation.md")
    assert "![time per call" not in report["markdown"]  # nothing was timed on the CPU
    if client.editor == "visual-studio-code":
        assert [shown.uri for shown in client.shown_documents] == [report["uri"]]

    assert await execute(client, "drtriton.apply", target) == {"applied": True}
    (applied,) = client.applied_edits
    version, edits = document_edits(client, applied.edit, uri)
    assert version in (1, None)
    assert all(edit.range.start.character == 0 for edit in edits)
    new_lines = "".join(edit.new_text for edit in edits)
    assert "@drtriton_dispatch(" in new_lines and "@triton.jit" in new_lines
    assert "class ScaledActivation" not in new_lines  # only insertions: the user's lines stay untouched

    # An edit inside the target: its result is not shown for the new text, not even before the new analysis.
    change_file(client, uri, 2, path.read_text().replace("/ 1.5", "/ 2.5"))
    assert [lens.command.title for lens in await code_lenses(client, uri)] == ["Generate Triton kernel"]
    hover = await client.text_document_hover_async(
        types.HoverParams(text_document=types.TextDocumentIdentifier(uri=uri), position=types.Position(12, 8))
    )
    assert hover is None
    information = types.DiagnosticSeverity.Information
    await wait_until(
        lambda: all(d.severity != information for d in client.diagnostics[uri]), 10, "the result's diagnostic to go"
    )
