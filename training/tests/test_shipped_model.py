"""The model the repository ships (`training/models`): its files are complete and in the product's format, and the
product's transformers backend loads it with no network and gets a valid script for a one-op program.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from torch import nn

from drtriton_lsp.models import formats
from drtriton_lsp.models.backends import CheckpointBackend, Sampling
from drtriton_lsp.runners.local import LocalRunner
from drtriton_lsp.worker.capture import capture_graph

SHIPPED = Path(__file__).resolve().parents[1] / "models"


class Sigmoid(nn.Module):
    def forward(self, x):
        return torch.sigmoid(x)


def test_the_shipped_model_is_complete_and_speaks_the_products_format():
    manifest = json.loads((SHIPPED / "drtriton_model.json").read_text())
    assert manifest["format"] == formats.FORMAT_VERSION and manifest["complete"]
    index = json.loads((SHIPPED / "model.safetensors.index.json").read_text())
    shards = set(index["weight_map"].values())
    assert shards and all((SHIPPED / shard).stat().st_size < 16 * 2**20 for shard in shards)
    assert json.loads((SHIPPED / "config.json").read_text())["use_cache"] is True
    assert "<" not in (SHIPPED / "README.md").read_text()  # the card's template fields are all filled


@pytest.mark.slow  # a worker loads the model (about 20 s on two cores)
def test_the_products_backend_loads_it_offline_and_it_writes_a_valid_script_for_one_op(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    graph = capture_graph(Sigmoid(), (torch.randn(8, 32),))
    with LocalRunner() as runner:
        backend = CheckpointBackend(str(SHIPPED), runner=runner)
        [[answer]] = backend.complete([formats.script_prompt(graph)], Sampling(1, temperature=0.0, max_tokens=64))
    parsed = formats.parse_script_answer(answer, graph)
    assert parsed.error == "", parsed.error
    assert parsed.script.startswith("kernel pointwise sigmoid ")
