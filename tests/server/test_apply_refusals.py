"""drtriton.apply on a result that must not be applied: the editor gets no edit, and the user a warning saying why.

The code lens hides the action for such a result, but a command can still be sent (a key binding, another client, a
stale lens): apply itself must refuse. Here the generated kernel fails verification.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lsp_helpers import code_lenses, execute, open_file, wait_for_job_end, wait_until
from lsprotocol import types

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

# a forward whose generated kernel fails verification (see the file's docstring)
COUNTING = (Path(__file__).parents[1] / "fixtures" / "refusals" / "counting.py").read_text()


async def test_apply_refuses_a_kernel_that_failed_verification(client, tmp_path):
    path = tmp_path / "counting.py"
    path.write_text(COUNTING)
    uri = open_file(client, path)
    target = {"uri": uri, "target": "Counting"}
    started = await execute(client, "drtriton.generate", target)
    end = await wait_for_job_end(client, started["token"])
    assert end.message.startswith("Counting: failed · ")
    assert "Apply verified kernel" not in [lens.command.title for lens in await code_lenses(client, uri)]

    answer = await execute(client, "drtriton.apply", target)

    refusal = "Counting has no verified kernel to apply (one faster than eager, or untimed); run Generate first"
    assert answer == {"applied": False, "message": refusal}
    warning = await wait_until(
        lambda: [m for m in client.messages if m.message == f"drtriton: {refusal}"], 5, "the refusal's warning"
    )
    assert warning[0].type == types.MessageType.Warning
    assert client.applied_edits == []
    assert path.read_text() == COUNTING
