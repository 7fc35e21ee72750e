"""How the benchmark builds a candidate's ModelNew for timing (`bench.candidate_model`): as the task builds Model.

Both the benchmark and the search's candidate timing use it; a ModelNew built without the task's constructor values
failed for every module that takes some (the search's timing called `ModelNew()`).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from drtriton_lsp.task import Task, load_module_from_source
from drtriton_lsp.worker.benchmark import candidate_model, run_candidate_timing

TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self, features, scale):
        super().__init__()
        self.linear = nn.Linear(features, features)
        self.scale = scale

    def forward(self, x):
        return self.linear(x) * self.scale

def get_inputs():
    return [torch.randn(4, 8)]

def get_init_inputs():
    return [8, 3.0]
'''

# the same module under the name a candidate has (timing does not care what its forward runs)
CANDIDATE = TASK.split("def get_inputs")[0].replace("class Model(", "class ModelNew(")

FUNCTIONAL_TASK = '''
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(4, 8)]
'''

FUNCTIONAL_CANDIDATE = '''
import torch.nn as nn

class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_min(0)
'''


def test_the_candidate_gets_the_tasks_constructor_values_and_eagers_weights(tmp_path: Path):
    task = load_module_from_source(TASK, "timing_task", tmp_path)
    eager = task.Model(*task.get_init_inputs()).eval()
    candidate = candidate_model(load_module_from_source(CANDIDATE, "timing_candidate", tmp_path), task, eager,
                                torch.device("cpu"))
    assert candidate.scale == 3.0 and candidate.linear.in_features == 8 and not candidate.training
    assert torch.equal(candidate.linear.weight, eager.linear.weight)
    x = torch.randn(4, 8)
    assert torch.equal(candidate(x), eager(x))


def test_a_task_without_constructor_values_builds_modelnew_with_none(tmp_path: Path):
    task = load_module_from_source(FUNCTIONAL_TASK, "timing_functional_task", tmp_path)
    candidate = candidate_model(load_module_from_source(FUNCTIONAL_CANDIDATE, "timing_functional_candidate", tmp_path),
                                task, task.Model().eval(), torch.device("cpu"))
    assert torch.equal(candidate(torch.tensor([-1.0, 2.0])), torch.tensor([0.0, 2.0]))


@pytest.mark.gpu
def test_the_searchs_candidate_timing_builds_modelnew_with_the_tasks_constructor_values(tmp_path: Path):
    task = Task(name="Model", source=TASK, kind="module")
    timed = run_candidate_timing({"task": task.to_json(), "candidates": [CANDIDATE]}, progress=lambda message: None)
    assert timed["reference_ms"] > 0 and len(timed["candidate_ms"]) == 1 and timed["candidate_ms"][0] > 0
