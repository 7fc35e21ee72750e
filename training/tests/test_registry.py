"""Every registry operator's shape rule agrees with PyTorch: sample, solve, build, run eagerly.

A mismatch (an error, or an output shape other than the solved one) is a bug in that rule.
"""

from __future__ import annotations

import pytest
import torch

from synthetic_programs import load_program, output_shapes
from drtriton_training.csp_dag import ProgramSynthesizer
from drtriton_training.emit import render_program
from drtriton_training.operators import default_registry
from drtriton_training.shapes import ShapeModel, SynthesisLimits

REGISTRY = default_registry()
SYNTHESIZER = ProgramSynthesizer()
FAMILIES = {"elementwise", "activation", "reduction", "softmax", "norm", "matmul", "conv", "pool", "loss", "shape"}


def test_registry_covers_the_families_of_model_code():
    assert len(REGISTRY) >= 60
    assert set(REGISTRY.families()) == FAMILIES
    with_parameters = {op.name for op in REGISTRY if op.has_parameters}
    assert {"linear", "conv2d", "conv_transpose3d", "layer_norm", "group_norm", "bias_add"} <= with_parameters


@pytest.mark.parametrize("name", REGISTRY.names())
def test_shape_rule_matches_pytorch(name):
    for seed in range(4):
        program = SYNTHESIZER.synthesize(1, seed, [name])
        source = render_program(program, REGISTRY)
        model, inputs = load_program(source)
        with torch.no_grad():
            result = model(*inputs)
        expected = [program.shapes[i] for i in program.dag.outputs()]
        assert output_shapes(result) == expected, source
        assert program.flops > 0 and program.bytes > 0


def test_parameters_are_modules_or_parameters_as_in_real_code():
    program = SYNTHESIZER.synthesize(1, 3, ["conv2d"])
    model, _ = load_program(render_program(program, REGISTRY))
    assert isinstance(model.conv1, torch.nn.Conv2d)
    program = SYNTHESIZER.synthesize(1, 3, ["bias_add"])
    model, _ = load_program(render_program(program, REGISTRY))
    assert isinstance(model.bias1, torch.nn.Parameter)


def test_group_norm_never_normalizes_a_single_value():
    # Regression: batch 1, one channel per group and no spatial size made PyTorch raise
    # "Expected more than 1 value per channel"; the rule must make that shape infeasible.
    model = ShapeModel(SynthesisLimits())
    batch, channels = model.dim(2), model.dim(2)
    model.equal(batch, 1)
    model.equal(channels, 2)
    REGISTRY["group_norm"].shape_rule(model, [(batch, channels)], {"groups": 2})
    assert model.solve(seed=0) is None
