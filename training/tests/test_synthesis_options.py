"""Synthesis options: the program dtype (float32, float16, bfloat16) and family allow/deny lists.

Each op runs in every dtype the registry allows it; ops it rules out never appear; defaults stay float32.
"""

from __future__ import annotations

import pytest
import torch

from synthetic_programs import load_program
from drtriton_training.csp_dag import ProgramSynthesizer
from drtriton_training.emit import render_program
from drtriton_training.operators import default_registry
from drtriton_training.registry import Operator

REGISTRY = default_registry()
HALF_DTYPES = ("float16", "bfloat16")
HALF_CASES = [(name, dtype) for dtype in HALF_DTYPES for name in REGISTRY.choices(dtype)]


def test_defaults_draw_every_operator_in_float32():
    assert REGISTRY.choices() == REGISTRY.names()
    synthesizer = ProgramSynthesizer()
    assert synthesizer.dtype == "float32"
    assert synthesizer.operator_names == REGISTRY.names()
    source = render_program(synthesizer.synthesize(3, 5), REGISTRY)
    assert "dtype=" not in source and "self.to(" not in source


def test_half_precision_leaves_out_the_ops_the_registry_marks():
    for dtype in HALF_DTYPES:
        excluded = set(REGISTRY.names()) - set(REGISTRY.choices(dtype))
        assert {"avg_pool3d", "instance_norm", "kl_div"} <= excluded
        assert excluded == {op.name for op in REGISTRY if dtype not in op.dtypes}
    assert {"conv_transpose1d", "conv_transpose2d", "conv_transpose3d"} <= (
        set(REGISTRY.names()) - set(REGISTRY.choices("bfloat16"))
    )
    with pytest.raises(ValueError, match="avg_pool3d"):
        ProgramSynthesizer(dtype="float16").synthesize(1, 0, ["avg_pool3d"])
    with pytest.raises(ValueError, match="unknown dtype"):
        ProgramSynthesizer(dtype="float64")


def test_avg_pool3d_is_left_out_because_pytorch_cpu_lacks_it_in_half_precision():
    # When PyTorch gains these kernels this fails, and avg_pool3d can join the half-precision sets.
    for dtype in (torch.float16, torch.bfloat16):
        with pytest.raises(RuntimeError, match="not implemented"):
            torch.nn.functional.avg_pool3d(torch.randn(1, 2, 3, 3, 3, dtype=dtype), 2)


@pytest.mark.parametrize("name,dtype", HALF_CASES)
def test_operator_runs_in_half_precision_with_parameters_and_inputs_in_that_dtype(name, dtype):
    synthesizer = ProgramSynthesizer(dtype=dtype)
    expected = getattr(torch, dtype)
    for seed in range(2):
        program = synthesizer.synthesize(1, seed, [name])
        model, inputs = load_program(render_program(program, REGISTRY))
        with torch.no_grad():
            result = model(*inputs)
        results = result if isinstance(result, tuple) else (result,)
        assert [tensor.dtype for tensor in results] == [expected] * len(results)
        assert all(tensor.dtype == expected for tensor in inputs if tensor.is_floating_point())
        assert all(tensor.dtype == expected for tensor in model.state_dict().values() if tensor.is_floating_point())


def test_a_half_precision_program_is_the_float32_one_in_half_the_bytes_and_hashes_apart():
    # Elementwise and activation ops are allowed in every dtype, so the same seed draws the same DAG.
    families = {"elementwise", "activation"}
    single = ProgramSynthesizer(families=families).synthesize(4, 21)
    for dtype in HALF_DTYPES:
        half = ProgramSynthesizer(dtype=dtype, families=families).synthesize(4, 21)
        assert half.shapes == single.shapes
        assert half.bytes * 2 == single.bytes
        assert half.canonical_hash() != single.canonical_hash()


def test_family_lists_restrict_the_operators_drawn():
    without_conv = ProgramSynthesizer(exclude_families={"conv"})
    assert without_conv.operator_names == [op.name for op in REGISTRY if op.family != "conv"]
    drawn = {step.operator for seed in range(30) for _, step in without_conv.synthesize(4, seed).compute_steps}
    assert drawn and all(REGISTRY[name].family != "conv" for name in drawn)
    only = ProgramSynthesizer(families={"reduction", "softmax"})
    drawn = {step.operator for seed in range(10) for _, step in only.synthesize(3, seed).compute_steps}
    assert {REGISTRY[name].family for name in drawn} <= {"reduction", "softmax"}
    with pytest.raises(ValueError, match="unknown families"):
        ProgramSynthesizer(exclude_families={"convolution"})
    with pytest.raises(ValueError, match="no operator is left"):
        ProgramSynthesizer(families={"conv"}, exclude_families={"conv"})


def test_an_operator_must_allow_float32_so_defaults_keep_every_op():
    relu = REGISTRY["relu"]
    with pytest.raises(ValueError, match="float32"):
        Operator("half_relu", relu.family, relu.inputs, relu.shape_rule, relu.forward, dtypes=("float16",))
