"""drtriton.apply on a result that must not be applied: the editor gets no edit, and the user a warning saying why.

The code lens hides the action for such a result, but a command can still be sent (a key binding, another client, a
stale lens): apply itself must refuse. Here the generated kernel fails verification.
"""

from __future__ import annotations

import pytest
from lsp_helpers import code_lenses, execute, open_file, wait_for_job_end, wait_until
from lsprotocol import types

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

# rand_like draws other numbers in the candidate's process than in the reference's: the kernel generated around it
# (sigmoid, mul and add in Triton) cannot match, so verification fails.
NOT_REPRODUCIBLE = """import torch


# drtriton: inputs = [torch.randn(64, 32)]
class Noisy(torch.nn.Module):
    def forward(self, x):
        return torch.sigmoid(x) * 2.0 + torch.rand_like(x)
"""


async def test_apply_refuses_a_kernel_that_failed_verification(client, tmp_path):
    path = tmp_path / "noisy.py"
    path.write_text(NOT_REPRODUCIBLE)
    uri = open_file(client, path)
    target = {"uri": uri, "target": "Noisy"}
    started = await execute(client, "drtriton.generate", target)
    end = await wait_for_job_end(client, started["token"])
    assert end.message.startswith("Noisy: failed · ")
    assert "Apply verified kernel" not in [lens.command.title for lens in await code_lenses(client, uri)]

    answer = await execute(client, "drtriton.apply", target)

    refusal = "Noisy has no verified kernel to apply (one faster than eager, or untimed); run Generate first"
    assert answer == {"applied": False, "message": refusal}
    warning = await wait_until(
        lambda: [m for m in client.messages if m.message == f"drtriton: {refusal}"], 5, "the refusal's warning"
    )
    assert warning[0].type == types.MessageType.Warning
    assert client.applied_edits == []
    assert path.read_text() == NOT_REPRODUCIBLE
