"""A target whose kernels Apply wrote into the file is shown as applied (its date and verdict from the block), with
Re-verify, Benchmark and Remove kernel, and no hint, Generate or on-save job; Re-verify checks the kernel as it stands
in the file (a hand-edited wrong kernel fails), and Remove kernel gives back the file as it was.
"""

from __future__ import annotations

import asyncio
import datetime
import re

import pytest
from lsp_helpers import (
    applied_text,
    change_file,
    code_actions,
    code_lenses,
    document_edits,
    execute,
    open_file,
    push_settings,
    save_file,
    wait_for_job_end,
)
from lsprotocol import types

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

TARGET = "ScaledActivation"


async def applied(client, path) -> tuple[str, str]:
    """Generate, apply, and the editor's text after the edit: (uri, text)."""
    uri = open_file(client, path)
    started = await execute(client, "drtriton.generate", {"uri": uri, "target": TARGET})
    assert (await wait_for_job_end(client, started["token"])).message.startswith(f"{TARGET}: verified")
    assert await execute(client, "drtriton.apply", {"uri": uri, "target": TARGET}) == {"applied": True}
    _, edits = document_edits(client, client.applied_edits[-1].edit, uri)
    written = applied_text(path.read_text(), edits)
    change_file(client, uri, 2, written)
    await lenses_of_the_new_text(client, uri)
    return uri, written


async def lenses_of_the_new_text(client, uri: str) -> list[str]:
    """An edit that covers a target's name hides its lenses until the new text is analysed."""
    for _ in range(100):
        titles = [lens.command.title for lens in await code_lenses(client, uri)]
        if titles:
            return titles
        await asyncio.sleep(0.1)
    raise AssertionError("no lens came back for the new text")


async def test_an_applied_kernel_is_shown_as_applied_re_verified_as_written_and_removed_cleanly(client, example_file):
    path = example_file()
    original = path.read_text()
    uri, written = await applied(client, path)
    line = next(number for number, text in enumerate(written.splitlines()) if text.startswith(f"class {TARGET}"))

    today = datetime.date.today().isoformat()
    titles = [lens.command.title for lens in await code_lenses(client, uri)]
    # short: in Neovim it shares the target's line with the actions
    assert re.fullmatch(rf"drtriton: kernel applied {today} · verified (\d+)/\1 trials", titles[0]), titles[0]
    assert titles[1:] == ["Re-verify", "Remove kernel"]  # no Generate, no Apply
    actions = [action.title for action in await code_actions(client, uri, line + 1)]
    assert actions == [
        f"drtriton: Re-verify the applied kernel of {TARGET}",
        f"drtriton: Remove kernel from {TARGET}",
    ]
    push_settings(client, onSave="search")  # a save starts no job and shows no fusion hint for the applied target
    jobs_before = len(client.progress_reports)
    save_file(client, uri)
    await asyncio.sleep(2)  # several times the save debounce
    assert len(client.progress_reports) == jobs_before
    assert not [d for d in client.diagnostics.get(uri, []) if d.severity == types.DiagnosticSeverity.Hint]
    push_settings(client, onSave="hint")

    started = await execute(client, "drtriton.verify", {"uri": uri, "target": TARGET})
    end = await wait_for_job_end(client, started["token"])
    assert re.fullmatch(rf"{TARGET}: re-verified \((\d+)/\1 trials, new inputs\) · no speed measured: no GPU", end.message)
    titles = [lens.command.title for lens in await code_lenses(client, uri)]
    verdict = end.message.removeprefix(f"{TARGET}: ")
    assert titles == [f"drtriton: kernel applied {today} · {verdict}", "Re-verify", "Remove kernel"]  # no GPU: no Benchmark

    assert await execute(client, "drtriton.removeKernel", {"uri": uri, "target": TARGET}) == {"removed": True}
    version, edits = document_edits(client, client.applied_edits[-1].edit, uri)
    assert version in (2, None)
    assert applied_text(written, edits) == original  # every other byte as it was
    change_file(client, uri, 3, original)
    assert await lenses_of_the_new_text(client, uri) == ["Generate Triton kernel"]


async def test_re_verify_checks_the_kernel_as_it_stands_in_the_file(client, example_file):
    path = example_file()
    uri, written = await applied(client, path)
    # a hand edit inside the written kernel (its arithmetic), as a user might make by mistake
    broken, count = re.subn(r"(\w+) \* 3\.0", r"\1 * 4.0", written, count=1)
    assert count == 1, "the written kernel multiplies by 3.0"
    change_file(client, uri, 3, broken)
    started = await execute(client, "drtriton.verify", {"uri": uri, "target": TARGET})
    end = await wait_for_job_end(client, started["token"])
    assert end.message.startswith(f"{TARGET}: failed · the results differ from the reference"), end.message
