"""textDocument/codeAction: listed instantly on any target, never running code; the pragma quick fix."""

from __future__ import annotations

import time

import pytest
from lsp_helpers import change_file, code_actions, document_edits, execute, open_file
from lsprotocol import types
from pygls.workspace import TextDocument

from drtriton_lsp.errors import SourceError
from drtriton_lsp.server import code_actions as code_actions_module
from drtriton_lsp.server.analysis import analyze_document
from drtriton_lsp.server.language_server import DrtritonLanguageServer
from drtriton_lsp.source.extract import extract_task, targets_with_inputs

pytestmark = pytest.mark.asyncio

WITHOUT_INPUTS = """import torch
import torch.nn as nn


class Gate(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.scale = nn.Parameter(torch.ones(width))

    def forward(self, x):
        return torch.sigmoid(x * self.scale) * x
"""


async def test_actions_listed_instantly_inside_a_target(client, example_file):
    uri = open_file(client, example_file())
    started = time.perf_counter()
    actions = await code_actions(client, uri, 20)  # inside ScaledActivation.forward
    elapsed = time.perf_counter() - started

    assert [action.title for action in actions] == ["drtriton: Generate Triton kernel for ScaledActivation"]
    assert actions[0].command == types.Command(
        title="drtriton: Generate Triton kernel for ScaledActivation",
        command="drtriton.generate",
        arguments=({"uri": uri, "target": "ScaledActivation"},),
    )
    assert elapsed < 1.0
    assert await code_actions(client, uri, 2) == []  # the imports: no target there


async def test_quick_fix_inserts_the_pragma_with_values_the_file_gives(client, tmp_path):
    path = tmp_path / "gate.py"
    path.write_text(WITHOUT_INPUTS + "\n\nWIDTH = 64\n")
    uri = open_file(client, path)

    actions = await code_actions(client, uri, 10)
    quick_fix = next(action for action in actions if action.kind == types.CodeActionKind.QuickFix)
    assert quick_fix.title == "drtriton: Add example-input pragma to Gate"
    version, (text_edit,) = document_edits(client, quick_fix.edit, uri)
    assert version in (1, None)
    assert text_edit.range.start == types.Position(4, 0)
    assert text_edit.new_text == "# drtriton: inputs = [torch.randn(8, 64)]\n# drtriton: init = [WIDTH]\n"

    lines = path.read_text().splitlines(keepends=True)
    fixed = "".join(lines[:4]) + text_edit.new_text + "".join(lines[4:])
    (entry,) = targets_with_inputs(fixed, str(path))
    assert entry.inputs_from == "pragma"
    task = extract_task(fixed, "Gate", str(path))
    namespace: dict = {}
    exec(compile(task.source, "task.py", "exec"), namespace)  # the pragma runs: WIDTH came along
    assert namespace["get_init_inputs"]() == [64]
    change_file(client, uri, 2, fixed)
    # The light bulb's instant answer knows Gate was edited: no quick fix from the old inputs (a second pragma).
    at_once = await code_actions(client, uri, 12, types.CodeActionTriggerKind.Automatic)
    assert [action.title for action in at_once] == ["drtriton: Generate Triton kernel for Gate"]
    # Asked for, the menu waits for the analysis of the new text, which finds the pragma.
    after = await code_actions(client, uri, 12)
    assert [action.title for action in after] == ["drtriton: Generate Triton kernel for Gate"]


async def test_a_value_the_file_does_not_give_is_a_placeholder_to_fill_in(client, tmp_path):
    path = tmp_path / "gate.py"
    path.write_text(WITHOUT_INPUTS)
    uri = open_file(client, path)

    actions = await code_actions(client, uri, 10)
    quick_fix = next(action for action in actions if action.kind == types.CodeActionKind.QuickFix)
    assert quick_fix.title == "drtriton: Add example-input pragma to Gate (then fill in width)"
    _, (text_edit,) = document_edits(client, quick_fix.edit, uri)
    assert text_edit.new_text == "# drtriton: inputs = [torch.randn(8, 64)]\n# drtriton: init = [<width>]\n"
    lines = WITHOUT_INPUTS.splitlines(keepends=True)
    change_file(client, uri, 2, "".join(lines[:4]) + text_edit.new_text + "".join(lines[4:]))
    answer = await execute(client, "drtriton.generate", {"uri": uri, "target": "Gate"})
    assert answer["status"] == "refused"
    assert answer["message"].startswith("The drtriton init pragma on line 6 still holds placeholders for `width`.")


@pytest.mark.parametrize(
    ("file_end", "value"),
    [("\n\nmodel = Gate(128)\n", "128"), ("\n\nmodel = Gate(width=2 * 8)\n", None), ("\n\nwidth = 16\n", "width")],
)
def test_the_pragma_takes_a_literal_argument_or_a_module_constant_and_nothing_computed(file_end, value):
    with pytest.raises(SourceError) as raised:
        extract_task(WITHOUT_INPUTS + file_end, "Gate", "gate.py")
    assert f"# drtriton: init = [{value or '<width>'}]" in raised.value.hint


def test_placeholders_become_tab_stops_where_the_editor_takes_snippet_edits(tmp_path):
    server = DrtritonLanguageServer()
    server.protocol.client_capabilities = types.ClientCapabilities(
        workspace=types.WorkspaceClientCapabilities(
            workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True, snippet_edit_support=True)
        )
    )
    path = tmp_path / "gate.py"
    source = WITHOUT_INPUTS.replace("def __init__(self, width):", "def __init__(self, width, depth):")
    path.write_text(source)
    document = TextDocument(path.as_uri(), source, version=1)
    analyzed = analyze_document(path.as_uri(), 1, source).target_named("Gate")
    action = code_actions_module._pragma_quick_fix(server, document, analyzed, code_actions_module.pragma_stub_lines(analyzed))
    assert action.title.endswith("(then fill in width, depth)")
    (edit,) = action.edit.document_changes[0].edits
    assert edit.snippet.value == "# drtriton: inputs = [torch.randn(8, 64)]\n# drtriton: init = [${1:width}, ${2:depth}]\n"
