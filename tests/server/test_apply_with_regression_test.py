"""drtriton.apply with drtriton.writeTests: the regression test runs against the new text before the edit is sent,
and lands beside the file once the editor applied it."""

from __future__ import annotations

import pytest
from lsp_helpers import execute, open_file, push_settings, wait_for_job_end, wait_until

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


async def test_apply_writes_a_passing_regression_test_beside_the_file(client, example_file):
    if client.editor == "neovim":
        pytest.skip("one editor is enough: the test runs in a subprocess the same way for both")
    path = example_file()
    push_settings(client, writeTests=True)
    uri = open_file(client, path)
    target = {"uri": uri, "target": "ScaledActivation"}
    started = await execute(client, "drtriton.generate", target)
    await wait_for_job_end(client, started["token"])

    applied = await execute(client, "drtriton.apply", target)

    test_file = path.parent / "test_drtriton_scaled_activation.py"
    assert applied == {"applied": True, "test": str(test_file)}
    assert len(client.applied_edits) == 1
    assert test_file.read_text().startswith('"""drtriton regression test for ScaledActivation')
    await wait_until(lambda: any("its regression test passed" in m.message for m in client.messages), 5, "the message")
    assert [p.name for p in path.parent.iterdir() if p.name.startswith(".drtriton")] == []
