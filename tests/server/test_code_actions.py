"""textDocument/codeAction: listed instantly on any target, never running code; the pragma quick fix."""

from __future__ import annotations

import time

import pytest
from lsp_helpers import change_file, code_actions, document_edits, open_file
from lsprotocol import types

from drtriton_lsp.source.extract import targets_with_inputs

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


async def test_quick_fix_inserts_the_pragma_the_error_suggests(client, tmp_path):
    path = tmp_path / "gate.py"
    path.write_text(WITHOUT_INPUTS)
    uri = open_file(client, path)

    actions = await code_actions(client, uri, 10)
    quick_fix = next(action for action in actions if action.kind == types.CodeActionKind.QuickFix)
    assert quick_fix.title == "drtriton: Add example-input pragma to Gate"
    version, (text_edit,) = document_edits(client, quick_fix.edit, uri)
    assert version in (1, None)
    assert text_edit.range.start == types.Position(4, 0)
    assert text_edit.new_text == "# drtriton: inputs = [torch.randn(8, 64)]\n# drtriton: init = [width]\n"

    lines = WITHOUT_INPUTS.splitlines(keepends=True)
    fixed = "".join(lines[:4]) + text_edit.new_text + "".join(lines[4:])
    (entry,) = targets_with_inputs(fixed, str(path))
    assert entry.inputs_from == "pragma"
    change_file(client, uri, 2, fixed)
    # The light bulb's instant answer knows Gate was edited: no quick fix from the old inputs (a second pragma).
    at_once = await code_actions(client, uri, 12, types.CodeActionTriggerKind.Automatic)
    assert [action.title for action in at_once] == ["drtriton: Generate Triton kernel for Gate"]
    # Asked for, the menu waits for the analysis of the new text, which finds the pragma.
    after = await code_actions(client, uri, 12)
    assert [action.title for action in after] == ["drtriton: Generate Triton kernel for Gate"]
