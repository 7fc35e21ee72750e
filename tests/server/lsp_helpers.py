"""Small steps the server tests share: open and change documents, run commands, wait for jobs.

Plain functions over pytest-lsp's client; the fixtures live in conftest.py.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import psutil
from lsprotocol import types
from pytest_lsp import LanguageClient

EDITORS = ("visual-studio-code", "neovim")
# warmWorker off: a worker started ahead would import torch beside every test; test_warm_worker.py turns it on
TEST_SETTINGS = {"device": "cpu", "trials": 2, "warmWorker": False}
# How the server logs a worker it started ahead (its pid between the two).
WARM_WORKER_ANNOUNCEMENT = ("drtriton: worker ", " started ahead for the next job")


def open_file(client: LanguageClient, path: Path, text: str | None = None) -> str:
    uri = path.as_uri()
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(
            text_document=types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text or path.read_text())
        )
    )
    return uri


def change_file(client: LanguageClient, uri: str, version: int, text: str) -> None:
    """Replace the whole text (a full-document change is valid under incremental sync too)."""
    client.text_document_did_change(
        types.DidChangeTextDocumentParams(
            text_document=types.VersionedTextDocumentIdentifier(uri=uri, version=version),
            content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
        )
    )


def save_file(client: LanguageClient, uri: str) -> None:
    client.text_document_did_save(types.DidSaveTextDocumentParams(text_document=types.TextDocumentIdentifier(uri=uri)))


def push_settings(client: LanguageClient, **changes) -> None:
    """The test settings with `changes`, pushed with `workspace/didChangeConfiguration`; the client answers
    `workspace/configuration` with the same (the server's pull after `initialized` may come later)."""
    settings = {**TEST_SETTINGS, **changes}
    client.set_configuration(settings, section="drtriton")
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"drtriton": settings}))


async def execute(client: LanguageClient, command: str, *arguments):
    return await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command=command, arguments=list(arguments))
    )


async def wait_until(condition, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out after {timeout_s:.0f} s waiting for {what}")


async def wait_for_job_end(client: LanguageClient, token: str, timeout_s: float = 120) -> types.WorkDoneProgressEnd:
    def ended():
        reports = client.progress_reports.get(token, [])
        return next((report for report in reports if isinstance(report, types.WorkDoneProgressEnd)), None)

    return await wait_until(ended, timeout_s, f"the end of progress {token}")


async def code_actions(
    client: LanguageClient, uri: str, line: int, trigger: types.CodeActionTriggerKind = types.CodeActionTriggerKind.Invoked
) -> list[types.CodeAction]:
    """The actions at column 4 of `line`: Invoked as by Ctrl+. (VS Code) or code_action() (Neovim); Automatic
    as by VS Code's light bulb, which asks on every cursor move."""
    return await client.text_document_code_action_async(
        types.CodeActionParams(
            text_document=types.TextDocumentIdentifier(uri=uri),
            range=types.Range(types.Position(line, 4), types.Position(line, 4)),
            context=types.CodeActionContext(diagnostics=[], trigger_kind=trigger),
        )
    ) or []


async def code_lenses(client: LanguageClient, uri: str) -> list[types.CodeLens]:
    return await client.text_document_code_lens_async(
        types.CodeLensParams(text_document=types.TextDocumentIdentifier(uri=uri))
    ) or []


def document_edits(client: LanguageClient, edit: types.WorkspaceEdit, uri: str) -> tuple[int | None, list[types.TextEdit]]:
    """(version, edits) of a one-document WorkspaceEdit: `documentChanges` where the editor supports them
    (VS Code; the version is then checked), else `changes` (this Neovim profile)."""
    if edit.document_changes:
        (document_edit,) = edit.document_changes
        assert document_edit.text_document.uri == uri
        return document_edit.text_document.version, list(document_edit.edits)
    assert client.editor == "neovim", "VS Code supports documentChanges: the server must send them"
    return None, list(edit.changes[uri])


def applied_text(text: str, edits: list[types.TextEdit]) -> str:
    """`text` with `edits` applied, as the editor would (positions in UTF-16 units equal characters here)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: types.Position) -> int:
        return starts[min(position.line, len(lines))] + position.character

    for edit in sorted(edits, key=lambda edit: offset(edit.range.start), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


def announced_pids(client: LanguageClient) -> list[int]:
    """The pids of the workers the server said it started ahead, in order (from window/logMessage)."""
    prefix, suffix = WARM_WORKER_ANNOUNCEMENT
    return [
        int(message.message[len(prefix) : -len(suffix)])
        for message in client.log_messages
        if message.message.startswith(prefix) and message.message.endswith(suffix)
    ]


def worker_processes(client: LanguageClient) -> list[psutil.Process]:
    """The drtriton worker processes the server started (the code under test runs in them). A worker's own child
    between fork and exec (a candidate process starting) still shows the worker's command line: it is not counted."""
    server = psutil.Process(client._server.pid)
    workers = []
    for process in server.children(recursive=True):
        try:
            if _is_worker(process) and not _is_worker(process.parent()):
                workers.append(process)
        except psutil.NoSuchProcess:
            continue
    return workers


def _is_worker(process: psutil.Process | None) -> bool:
    return process is not None and "drtriton_lsp.worker.main" in " ".join(process.cmdline())
