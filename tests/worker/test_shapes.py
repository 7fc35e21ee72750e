"""Verification's size planning: only free dimensions change, shared symbols move together.

Pure functions over shapes; no model runs here.
"""

from __future__ import annotations

import torch

from drtriton_lsp.worker.shapes import CPU_INPUT_ELEMENT_BUDGET, plan_input_shapes, resize_inputs


def test_free_dims_get_an_odd_size_and_fixed_dims_stay():
    example = [torch.randn(64, 32), torch.randn(32)]
    plan = plan_input_shapes(example, {"inputs": [["s0", 32], [32]], "ranges": {"s0": [2, None]}}, reduced=False)
    assert plan.primary == [[64, 32], [32]]
    assert plan.odd == [[[63, 32], [32]]]


def test_a_symbol_shared_by_two_inputs_changes_in_both():
    example = [torch.randn(16, 8), torch.randn(16, 8)]
    symbolic = {"inputs": [["s0", "s1"], ["s0", "s1"]], "ranges": {}}
    plan = plan_input_shapes(example, symbolic, reduced=False)
    assert plan.odd[0][0] == plan.odd[0][1] == [15, 7]


def test_reduced_sizes_fit_the_cpu_budget_without_touching_fixed_dims():
    example = [torch.randn(8192, 1024)]
    plan = plan_input_shapes(example, {"inputs": [["s0", 1024]], "ranges": {"s0": [2, None]}}, reduced=True)
    rows, columns = plan.primary[0]
    assert columns == 1024 and rows * columns <= CPU_INPUT_ELEMENT_BUDGET and rows >= 2


def test_without_free_dims_no_odd_sizes_are_tried_and_the_plan_says_why():
    plan = plan_input_shapes([torch.randn(4, 4)], {"inputs": [[4, 4]], "ranges": {}}, reduced=False)
    assert plan.odd == [] and "fixes every input size" in plan.odd_reason
    assert plan_input_shapes([torch.randn(4)], None, reduced=False).odd_reason


def test_odd_sizes_respect_the_symbol_range():
    plan = plan_input_shapes([torch.randn(4, 3)], {"inputs": [["s0", 3]], "ranges": {"s0": [4, 4]}}, reduced=False)
    assert plan.odd == [] and plan.odd_reason


def test_resizing_slices_or_tiles_the_drawn_values():
    x = torch.arange(12.0).reshape(3, 4)
    smaller, larger = resize_inputs([x, x], [[2, 4], [5, 4]])
    assert torch.equal(smaller, x[:2])
    assert larger.shape == (5, 4) and torch.equal(larger[3:], x[:2])
    assert resize_inputs([7, x], [None, None])[0] == 7
    # compact copies: a view of the draw would keep it alive, and saving one (for the candidate) writes all of it
    assert smaller.untyped_storage().nbytes() == smaller.numel() * smaller.element_size()
    assert smaller.untyped_storage().data_ptr() != x.untyped_storage().data_ptr()


def test_an_odd_example_size_moves_to_another_odd_size():
    plan = plan_input_shapes([torch.randn(7, 4)], {"inputs": [["s0", 4]], "ranges": {"s0": [2, None]}}, reduced=False)
    (odd_rows, _), = plan.odd[0]
    assert odd_rows % 2 == 1 and odd_rows != 7
