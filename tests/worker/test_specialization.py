"""Capture records what the kernels are specialised on: every scalar reachable from the model, the call's
arguments (defaults included), tensor layouts and free sizes, module constants, and whether the mode matters."""

import textwrap

import pytest

torch = pytest.importorskip("torch")

from drtriton_lsp.source.extract import extract_task  # noqa: E402
from drtriton_lsp.worker.capture_job import run_capture  # noqa: E402 - after the torch check

USER_FILE = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn

    EPS = 1e-6


    # drtriton: inputs = [torch.randn(8, 64)]
    # drtriton: init = [64, EPS]
    class RMSNorm(nn.Module):
        def __init__(self, dim, eps=1e-6):
            super().__init__()
            self.eps = eps
            self.weight = nn.Parameter(torch.ones(dim))
            self.norm = nn.LayerNorm(dim)

        def forward(self, x):
            return self.norm(x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight)


    # drtriton: inputs = [torch.randn(8, 64)]
    class HalvedWhileTraining(nn.Module):
        def forward(self, x):
            return x * 0.5 if self.training else x * 2.0


    # drtriton: inputs = [torch.randn(8, 64)]
    def scaled_gelu(x, scale: float = 1.702):
        return x * torch.sigmoid(scale * x)
    """
)


def guards_of(target: str) -> list[dict]:
    task = extract_task(USER_FILE, target, "user.py")
    return run_capture({"task": task.to_json()}, lambda _message: None)["guards"]


@pytest.mark.slow
def test_a_module_is_guarded_on_its_scalars_submodules_parameters_inputs_and_constants():
    guards = guards_of("RMSNorm")

    assert {"kind": "attribute", "name": "eps", "value": {"float": "1e-06"}} in guards
    assert {"kind": "attribute", "name": "norm.eps", "value": {"float": "1e-05"}} in guards
    assert {"kind": "attribute", "name": "norm.normalized_shape", "value": {"tuple": [64]}} in guards
    assert {"kind": "module", "name": "norm", "value": {"class": ["torch.nn.modules.normalization", "LayerNorm"]}} in guards
    assert {"kind": "parameter", "name": "weight", "dtype": "float32", "shape": [64]} in guards
    assert {"kind": "tensor", "name": "x", "dtype": "float32", "shape": [None, 64]} in guards
    [sizes] = [guard for guard in guards if guard["kind"] == "sizes"]
    assert sizes["dims"] == [["x", 0]] and sizes["low"] == 2 and sizes["high"] is None
    assert {"kind": "global", "name": "EPS", "value": {"float": "1e-06"}} in guards
    assert {"kind": "training", "name": "uniform"} in guards  # the same graph in training mode
    assert not any(guard["kind"] == "attribute" and guard["name"] in ("training", "_parameters") for guard in guards)


@pytest.mark.slow
def test_a_forward_that_reads_self_training_is_guarded_to_eval_mode():
    guards = guards_of("HalvedWhileTraining")

    assert {"kind": "training", "name": "eval"} in guards


@pytest.mark.slow
def test_a_function_is_guarded_on_its_arguments_defaults_included_and_not_on_its_wrapper():
    guards = guards_of("scaled_gelu")

    assert {"kind": "argument", "name": "scale", "value": {"float": "1.702"}} in guards
    assert {"kind": "tensor", "name": "x", "dtype": "float32", "shape": [None, None]} in guards
    assert not any(guard["kind"] in ("training", "attribute", "module") for guard in guards)
