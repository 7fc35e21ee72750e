"""`workspace/executeCommand` drtriton.apply: writes a verified kernel into the file with `workspace/applyEdit`.

The edit is computed against the text the job read and sent only if the document is still at that version
(else a `window/showMessageRequest` offers to re-run generate); editors apply it as one undoable change.
With `drtriton.writeTests`, a regression test runs against the new text first (in a subprocess) and is
written beside the file once the edit is applied; a failing test means nothing is applied.
Applying changes the target, so its result is no longer current: asked again, apply says it is done already.
"""

from __future__ import annotations

import difflib
from typing import TYPE_CHECKING, Any

from lsprotocol import types

from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.server.generate import request_generate
from drtriton_lsp.server.language_server import DrtritonLanguageServer, target_from_arguments

if TYPE_CHECKING:
    from drtriton_lsp.server.results import TargetResult
    from drtriton_lsp.source.regression_test import RegressionTest

APPLY = "drtriton.apply"
RERUN_GENERATE = "Re-run generate"


def line_edits(before: str, after: str) -> list[types.TextEdit]:
    """The smallest whole-line edits that turn `before` into `after`, in `before`'s coordinates."""
    old_lines = before.splitlines(keepends=True)
    new_lines = after.splitlines(keepends=True)
    edits = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, old_start, old_end, new_start, new_end in matcher.get_opcodes():
        if tag == "equal":
            continue
        start = types.Position(line=old_start, character=0)
        if old_end == len(old_lines) and old_lines and not old_lines[-1].endswith(("\n", "\r")):
            end = types.Position(line=old_end - 1, character=len(old_lines[-1]))  # a last line without newline
        else:
            end = types.Position(line=old_end, character=0)
        edits.append(types.TextEdit(range=types.Range(start, end), new_text="".join(new_lines[new_start:new_end])))
    return edits


async def send_line_edits(ls: DrtritonLanguageServer, document, before: str, after: str, label: str) -> str:
    """Ask the editor to turn `document` (read as `before`) into `after`, as one undoable edit tied to its version;
    "" when it did, else why not."""
    edit = ls.document_edit(document, line_edits(before, after))
    response = await ls.workspace_apply_edit_async(types.ApplyWorkspaceEditParams(edit=edit, label=f"drtriton: {label}"))
    return "" if response.applied else f"the editor did not apply the edit ({response.failure_reason or 'no reason given'})"


def register(server: DrtritonLanguageServer) -> None:
    @server.command(APPLY)
    async def apply_kernel(ls: DrtritonLanguageServer, *arguments: Any) -> dict[str, Any]:
        target = target_from_arguments(arguments)
        if target is None:
            return {"applied": False, "message": "drtriton.apply takes one argument: {uri, target}"}
        uri, name = target
        found = await ls.analysis_of(uri)
        result = ls.results.current(found[1], name) if found is not None else None
        if found is not None and result is None and ls.results.outdated_by(found[1], name) == "applied":
            return _refuse(ls, f"{name}: its kernel is already applied; nothing was changed")
        from drtriton_lsp.engine.pipeline import provenance_text, write_back_refusal
        from drtriton_lsp.source.writeback import write_back  # libcst: loaded on the first apply, not at start-up

        if result is not None and result.outcome is not None and write_back_refusal(result.outcome):
            return _refuse(ls, f"{name}: {write_back_refusal(result.outcome)}")
        if found is None or result is None or not result.applicable:
            return _refuse(ls, f"{name} has no verified kernel to apply (one faster than eager, or untimed); run Generate first")
        document = found[0]
        if document.version != result.source_version:
            message = (
                f"{name}: the file changed since the job read it (version {result.source_version}, now "
                f"{document.version}); nothing was applied, so your edits are safe. Re-run generate to get a "
                f"kernel for the current text."
            )
            # Asked in the background: the command answers now, the user may take their time to choose.
            ls.in_background(_offer_rerun(ls, uri, name, message))
            return {"applied": False, "message": message}
        outcome = result.outcome
        try:
            written = write_back(result.source_text, name, outcome.program, provenance_text(outcome), outcome.guards)
            test = await _checked_regression_test(ls, uri, name, result, written) if ls.settings.writeTests else None
        except DrtritonError as problem:
            return _refuse(ls, f"{name}: {problem.message} {problem.hint}")
        failure = await send_line_edits(ls, document, result.source_text, written, f"apply verified kernel to {name}")
        if failure:
            return _refuse(ls, f"{name}: {failure}")
        ls.results.mark_applied(result)
        if test is None:
            return {"applied": True}
        from drtriton_lsp.source.regression_test import write_regression_test

        try:
            write_regression_test(test)
        except DrtritonError as problem:
            ls.tell(f"{name}: applied, but {problem.message}; {problem.hint}", types.MessageType.Warning)
            return {"applied": True, "test": None}
        ls.tell(f"{name}: applied; its regression test passed and is in {test.path}")
        return {"applied": True, "test": str(test.path)}


async def _checked_regression_test(
    ls: DrtritonLanguageServer, uri: str, name: str, result: TargetResult, written: str
) -> RegressionTest:
    """The regression test for the applied kernel, run against `written` in a subprocess before the edit is sent
    (drtriton.writeTests); a DrtritonError says why it failed, and then nothing is applied."""
    import asyncio
    from pathlib import Path

    from pygls.uris import to_fs_path

    from drtriton_lsp.source.extract import example_input_expressions
    from drtriton_lsp.source.regression_test import check_regression_test, regression_test

    path = Path(to_fs_path(uri))
    outcome = result.outcome
    inputs = example_input_expressions(result.source_text, name, str(path))
    test = regression_test(path, name, outcome.task.kind, inputs, outcome.guards)
    ls.tell(f"{name}: running its regression test against the new file before applying")
    await asyncio.to_thread(check_regression_test, test, path, written.encode("utf-8"))
    return test


async def _offer_rerun(ls: DrtritonLanguageServer, uri: str, target_name: str, message: str) -> None:
    """A warning with a "Re-run generate" button (VS Code: on the notification; Neovim: a numbered choice)."""
    try:
        choice = await ls.window_show_message_request_async(
            types.ShowMessageRequestParams(
                type=types.MessageType.Warning,
                message=f"drtriton: {message}",
                actions=[types.MessageActionItem(title=RERUN_GENERATE)],
            )
        )
    except Exception as refusal:  # an editor that fails the request still saw nothing applied
        ls.log(f"drtriton: could not offer to re-run generate ({refusal})")
        return
    if choice is not None and choice.title == RERUN_GENERATE:
        await request_generate(ls, uri, target_name)


def _refuse(ls: DrtritonLanguageServer, message: str) -> dict[str, Any]:
    ls.tell(message, types.MessageType.Warning)
    return {"applied": False, "message": message}
