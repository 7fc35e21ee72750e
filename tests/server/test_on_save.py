"""On save: fusion hints (onSave = hint), nothing (off), or hints plus a background generate job (search).

Hints are Hint diagnostics; the background job shows as any job does, with `$/progress` and a lens.
"""

from __future__ import annotations

import asyncio

import pytest
from lsp_helpers import (
    change_file,
    code_lenses,
    execute,
    open_file,
    push_settings,
    save_file,
    wait_for_job_end,
    wait_until,
)
from lsprotocol import types

pytestmark = pytest.mark.asyncio


async def test_save_publishes_fusion_hints(client, example_file):
    path = example_file()
    uri = open_file(client, path)
    save_file(client, uri)
    diagnostics = await wait_until(lambda: client.diagnostics.get(uri), 5, "hints")
    (hint,) = diagnostics
    assert hint.severity == types.DiagnosticSeverity.Hint
    assert hint.message.startswith("8 elementwise ops fusible into 1 kernel; est. 8x fewer bytes moved for this chain")
    assert (hint.range.start.line, hint.range.end.line) == (19, 21)


async def test_on_save_off_publishes_nothing(client, example_file):
    push_settings(client, onSave="off")
    uri = open_file(client, example_file())
    save_file(client, uri)
    await asyncio.sleep(1.5)  # five times the save debounce
    assert uri not in client.diagnostics
    assert client.progress_reports == {}

    push_settings(client, onSave="hint")  # the same document and save, with hints on: they come
    save_file(client, uri)
    await wait_until(lambda: client.diagnostics.get(uri), 5, "hints")


@pytest.mark.slow
async def test_on_save_search_starts_a_background_job(client, example_file):
    push_settings(client, onSave="search")
    uri = open_file(client, example_file())
    save_file(client, uri)

    begin = await wait_until(
        lambda: next((reports[0] for reports in client.progress_reports.values() if reports), None), 10, "a job"
    )
    (token,) = client.progress_reports
    assert begin == types.WorkDoneProgressBegin(title="drtriton: ScaledActivation", message="starting", cancellable=True)
    (lens,) = await code_lenses(client, uri)
    assert lens.command.title == "drtriton: generating a kernel… (click to cancel)"
    assert await execute(client, "drtriton.cancel", "1") == {"cancelled": True, "jobId": "1"}
    await wait_for_job_end(client, token, timeout_s=60)
    assert [m.type for m in client.messages] == [types.MessageType.Info]  # "job 1 cancelled": no refusal shown


@pytest.mark.slow
async def test_a_save_during_a_search_job_gets_one_follow_up_job_for_the_newest_text(client, example_file):
    push_settings(client, onSave="search")
    path = example_file()
    uri = open_file(client, path)
    save_file(client, uri)
    await wait_until(lambda: len(client.progress_reports) == 1, 10, "the first job")
    (first,) = client.progress_reports
    # two saves while it runs, the target edited before each: one follow-up job, for the last text
    for version, divisor in ((2, "2.5"), (3, "3.5")):
        change_file(client, uri, version, path.read_text().replace("/ 1.5", f"/ {divisor}"))
        save_file(client, uri)
    await wait_for_job_end(client, first, timeout_s=300)
    await wait_until(lambda: len(client.progress_reports) == 2, 10, "the follow-up job")
    (follow_up,) = [token for token in client.progress_reports if token != first]
    end = await wait_for_job_end(client, follow_up, timeout_s=300)
    assert end.message.startswith("ScaledActivation: verified")
    titles = [lens.command.title for lens in await code_lenses(client, uri)]
    assert titles == ["verified · no speed measured: no GPU", "Apply verified kernel"]  # for the newest text
    await asyncio.sleep(1.5)
    assert len(client.progress_reports) == 2  # and no third job
