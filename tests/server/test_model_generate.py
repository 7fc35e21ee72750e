"""Generate with `drtriton.model.*` set: the editor's job asks a real (tiny) model in a worker beside the compiler,
reports the turns as progress, credits the winner's source, and Apply refuses a module a model wrote.
"""

from __future__ import annotations

import pytest
from lsp_helpers import code_lenses, execute, open_file, push_settings, wait_for_job_end, wait_until
from lsprotocol import types

from drtriton_lsp.models import formats
from drtriton_lsp.source.extract import extract_task
from tests.models.tiny_models import HYPOT, HYPOT_KERNEL, build_tiny_model

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]


@pytest.fixture(scope="module")
def hypot_model(tmp_path_factory):
    """A checkpoint that answers the Hypot task's kernel prompt with HYPOT_KERNEL (the compiler has no template)."""
    prompt = formats.kernel_prompt(extract_task(HYPOT, "Hypot", "hypot.py").source)
    return build_tiny_model(tmp_path_factory.mktemp("hypot_model"), {prompt: HYPOT_KERNEL})


async def test_generate_with_a_model_keeps_its_verified_kernel_and_apply_refuses_to_write_it(
    client, hypot_model, tmp_path
):
    path = tmp_path / "hypot.py"
    path.write_text(HYPOT)
    push_settings(client, model={"backend": "transformers", "path": str(hypot_model), "samples": 2, "turns": 0})
    uri = open_file(client, path)
    started = await execute(client, "drtriton.generate", {"uri": uri, "target": "Hypot"})

    end = await wait_for_job_end(client, started["token"], timeout_s=300)
    assert end.message.startswith("Hypot: verified")
    messages = [report.message or "" for report in client.progress_reports[started["token"]]]
    assert any("model: turn 1/1, asking transformers for 2 answers" in message for message in messages)
    report = await execute(client, "drtriton.showReport", {"uri": uri, "target": "Hypot"})
    assert "| candidates by source | compiler 0, model 2 |" in report["markdown"]
    assert "| winner | model kernel, sample 0, turn 0 |" in report["markdown"]

    titles = [lens.command.title for lens in await code_lenses(client, uri)]
    assert "Apply verified kernel" not in titles  # never offered to be refused
    answer = await execute(client, "drtriton.apply", {"uri": uri, "target": "Hypot"})
    assert answer["applied"] is False and "a module a model wrote" in answer["message"]
    await wait_until(lambda: [m for m in client.messages if m.type == types.MessageType.Warning], 5, "the refusal")
    assert client.applied_edits == []
