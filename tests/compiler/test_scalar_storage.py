"""The compiler's rounding of a Python scalar to a tensor dtype (done without torch, so that the language server never
imports it) matches what torch stores, at the edges included: overflow, subnormals, ties, NaN, signed zero.
"""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from drtriton_lsp.compiler.elementwise import stored_as

FLOAT_DTYPES = ["float64", "float32", "float16", "bfloat16"]
EDGES = [0.1, 1 / 3, 2.7, 65504.0, 65520.0, 70000.0, 3.4e38, 3.5e38, 1e-8, 1e-40, 1.00390625, 1.0078125, 1.01171875,
         -0.0, math.inf, -math.inf, math.nan]


def torch_stores(value: float, dtype: str) -> float | int | bool:
    return torch.tensor(value, dtype=getattr(torch, dtype)).item()


def same(a, b) -> bool:
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b and math.copysign(1, a) == math.copysign(1, b)


@pytest.mark.parametrize("dtype", FLOAT_DTYPES)
@pytest.mark.parametrize("value", EDGES)
def test_edge_values_round_as_torch_stores_them(value, dtype):
    assert same(stored_as(value, dtype), torch_stores(value, dtype))


@settings(max_examples=300, deadline=None)
@given(value=st.floats(allow_nan=False), dtype=st.sampled_from(FLOAT_DTYPES))
def test_any_float_rounds_as_torch_stores_it(value, dtype):
    assert same(stored_as(value, dtype), torch_stores(value, dtype))


@given(value=st.floats(min_value=-1e9, max_value=1e9), dtype=st.sampled_from(["int32", "int64", "bool"]))
def test_integers_and_bools_as_torch_stores_them(value, dtype):
    assert stored_as(value, dtype) == torch_stores(value, dtype)
