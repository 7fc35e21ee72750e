"""The ATen audit in the candidate's process: poisoned, guarded allocations; PyTorch ops counted below any patching;
and which buffers hold values a Triton launch computed rather than copied.
"""

from __future__ import annotations

import subprocess
import sys

import torch

from drtriton_lsp.worker.op_audit import GUARD_BYTES, CandidateAudit, OpRecorder, guard_launch


def test_fresh_buffers_are_poisoned_and_filled_factories_keep_their_values():
    torch.manual_seed(5)
    state = torch.get_rng_state()
    with CandidateAudit(poison_seed=11) as audit:
        fresh = [torch.empty(64, 5), torch.empty_like(torch.ones(700)), torch.empty_strided((20, 30), (1, 20)),
                 torch.ones(1).new_empty(400), torch.empty(300, dtype=torch.int64)]
        zeros = torch.zeros(6)
        full = torch.full((2, 2), 3.0)
    # random leftovers no correct output holds by chance, drawn without touching the candidate's RNG
    assert all(float(t.float().std()) > 50 for t in fresh)
    assert torch.equal(torch.get_rng_state(), state)
    assert fresh[2].stride() == (1, 20)
    assert bool((zeros == 0).all()) and bool((full == 3.0).all())
    assert len(audit.buffers) == 9 and audit.broken_guards() == []  # the two torch.ones() inside count too
    with CandidateAudit(poison_seed=11):
        again = torch.empty(64, 5)
    with CandidateAudit(poison_seed=12):
        other = torch.empty(64, 5)
    assert torch.equal(again, fresh[0]) and not torch.equal(other, fresh[0])
    with CandidateAudit(poison_seed=11):
        # one-element outputs (a loss, a count) are poisoned too: an unwritten 0 would match a zero result
        scalar, count = torch.empty(()), torch.empty(1, dtype=torch.int64)
    assert float(scalar) != 0.0 and int(count) != 0


def test_a_write_past_the_end_of_a_buffer_breaks_its_guard():
    with CandidateAudit() as audit:
        out = torch.empty(10)
    with audit.pause():
        out.as_strided((11,), (1,))[10] = 1.0  # one element past the end, as an unmasked last block writes
    assert audit.broken_guards() == ["empty [10] torch.float32"]


def test_the_guard_after_a_buffer_spans_64_kib_and_its_last_byte_is_watched():
    assert GUARD_BYTES == 64 * 1024  # docs/verification.md's figure: a GPU allocator's slack is smaller
    with CandidateAudit() as audit:
        out = torch.empty(10)
    last = 10 + GUARD_BYTES // out.element_size() - 1  # elements from the view's start to the guard's last one
    with audit.pause():
        out.as_strided((last + 1,), (1,))[last] = 1.0
    assert audit.broken_guards() == ["empty [10] torch.float32"]


def test_a_fresh_boolean_buffer_holds_both_values():
    # an unwritten boolean output must not match by chance: all-True (or all-False) leftovers would match often
    with CandidateAudit(poison_seed=3):
        flags = torch.empty(256, dtype=torch.bool)
    assert 0 < int(flags.sum()) < 256


def test_a_write_before_the_start_of_a_buffer_breaks_its_guard():
    with CandidateAudit() as audit:
        out = torch.empty(4, 4)
    out.untyped_storage()  # the guard lies in the same allocation, before the view's first element
    with audit.pause():
        out.as_strided((1,), (1,), out.storage_offset() - 1)[0] = 2.0
    assert len(audit.broken_guards()) == 1


def test_compute_ops_are_counted_and_views_copies_and_allocations_are_not():
    x = torch.randn(4, 8)
    with torch.no_grad(), OpRecorder() as recorder:
        y = torch.relu(x.t().contiguous()).view(-1) * 2
        torch.empty(3)
        y.clone()
    assert dict(recorder.compute_ops) == {"aten.relu.default": 1, "aten.mul.Tensor": 1}


def _launch(audit: CandidateAudit, tensors: list[torch.Tensor], kernel) -> None:
    """What the launch counter does around a launch: snapshot, run, classify the writes."""
    with audit.pause():
        before = [t.clone() for t in tensors]
        kernel()
        audit.after_launch(before, tensors)


def test_a_launch_that_computes_marks_its_output_and_pytorch_ops_carry_the_mark():
    x = torch.randn(16)
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        out = torch.empty(16)
        _launch(audit, [x, out], lambda: out.copy_(torch.sigmoid(x)))
        doubled = out * 2
    assert audit.holds_triton_values(out) and audit.holds_triton_values(doubled)
    assert not audit.holds_triton_values(x)


def test_a_launch_that_only_copies_a_pytorch_result_marks_nothing():
    x = torch.randn(8, 16)
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        result = torch.relu(x)
        out = torch.empty(16, 8)
        _launch(audit, [result, out], lambda: out.copy_(result.t()))  # a transposing copy is still a copy
        scaled = torch.empty(8, 16)
        _launch(audit, [result, scaled], lambda: scaled.copy_(result * 1.0))
    assert not audit.holds_triton_values(out) and not audit.holds_triton_values(scaled)
    assert dict(audit.compute_ops) == {"aten.relu.default": 1}


def test_overwriting_a_triton_buffer_with_a_pytorch_result_drops_the_mark():
    x = torch.randn(16)
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        out = torch.empty(16)
        _launch(audit, [x, out], lambda: out.copy_(torch.exp(x)))
        out.copy_(torch.relu(x))
    assert not audit.holds_triton_values(out)


def test_a_constant_fill_is_not_a_computation():
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        out = torch.empty(32)
        _launch(audit, [out], lambda: out.fill_(1.5))
    assert not audit.holds_triton_values(out)


def test_a_launch_writing_a_zero_dimensional_result_is_classified():
    x = torch.randn(16)
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        total = torch.empty(())
        _launch(audit, [x, total], lambda: total.copy_(x.exp().sum()))
    assert audit.holds_triton_values(total)


def test_a_launch_that_changes_values_by_more_than_the_float32_tolerance_computed_them():
    # a real computation with a small effect (x * 1.001) is not a copy: float32's 1e-4 decides, not TF32's 1e-2
    x = torch.linspace(1.0, 4.0, 64)
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        out = torch.empty(64)
        _launch(audit, [x, out], lambda: out.copy_(x * 1.001))
    assert audit.holds_triton_values(out)


def test_a_bfloat16_launch_is_judged_with_the_bfloat16_tolerance():
    # each value moved by more than bfloat16's 1e-2 (and less than the interpreter's 1.6e-2): computed, not copied
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], dtype=torch.bfloat16)
    moved = torch.tensor([1.03125, 2.03125, 3.046875, 4.0625], dtype=torch.bfloat16)
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        out = torch.empty(4, dtype=torch.bfloat16)
        _launch(audit, [x, out], lambda: out.copy_(moved))
    assert audit.holds_triton_values(out)


def test_a_buffer_filled_and_computed_into_by_pytorch_holds_no_triton_values():
    # torch.zeros(...).add_(torch.relu(x)) is PyTorch's result in a fresh buffer: nothing Triton computed
    x = torch.randn(16)
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        out = torch.zeros(16)
        out.add_(torch.relu(x))
        fresh = torch.empty(16)
    assert not audit.holds_triton_values(out) and not audit.holds_triton_values(fresh)


def test_a_launch_reading_tensors_of_other_sizes_than_it_writes_is_classified():
    x, bias = torch.randn(8, 16), torch.randn(16)
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        out = torch.empty(8, 16)
        _launch(audit, [x, bias, out], lambda: out.copy_(x + bias))
    assert audit.holds_triton_values(out)


def test_a_copy_of_a_pytorch_result_holding_nan_is_still_a_copy():
    x = torch.randn(8, 16)  # about half negative: log gives NaN there
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        result = torch.log(x)
        out = torch.empty(8, 16)
        _launch(audit, [result, out], lambda: out.copy_(result))
        transposed = torch.empty(16, 8)
        _launch(audit, [result, transposed], lambda: transposed.copy_(result.t()))
    assert bool(result.isnan().any())
    assert not audit.holds_triton_values(out) and not audit.holds_triton_values(transposed)


def test_the_launch_counters_hook_classifies_a_launch_only_when_values_are_tracked():
    x = torch.randn(16)
    assert guard_launch(None) is None and guard_launch(CandidateAudit()) is None
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        out = torch.empty(16)
        after = guard_launch(audit)([x, out])  # what the launch counter calls just before a launch
        with audit.pause():
            out.copy_(torch.sigmoid(x))
        after([x, out])
    assert audit.holds_triton_values(out)


def test_pytorch_writing_into_a_triton_buffer_through_out_drops_the_mark():
    x = torch.randn(16)
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        out = torch.empty(16)
        _launch(audit, [x, out], lambda: out.copy_(torch.exp(x)))
        torch.mul(x, 2.0, out=out)
    assert not audit.holds_triton_values(out)


def test_copying_a_triton_result_with_pytorch_keeps_the_mark():
    x = torch.randn(16)
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        out = torch.empty(16)
        _launch(audit, [x, out], lambda: out.copy_(torch.exp(x)))
        moved = torch.empty(16)
        moved.copy_(out)
    assert audit.holds_triton_values(moved)


def test_a_launch_that_copies_a_one_element_pytorch_result_computes_nothing():
    x = torch.randn(64)
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        loss = torch.sum(x * x)  # a loss computed in PyTorch, copied into the output by a kernel
        out = torch.empty(())
        _launch(audit, [loss, out], lambda: out.copy_(loss))
    assert not audit.holds_triton_values(out)


def test_a_constant_fill_of_two_elements_is_not_a_computation():
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        out = torch.empty(2)
        _launch(audit, [out], lambda: out.fill_(0.5))
    assert not audit.holds_triton_values(out)


def test_an_unmasked_write_into_an_empty_buffer_breaks_its_guard():
    # a kernel that stores without a mask writes its first element even when the output has none
    for shape in [(0,), (2, 0), (0, 3)]:
        with CandidateAudit() as audit:
            out = torch.empty(shape)
        with audit.pause():
            out.as_strided((1,), (1,))[0] = 1.0
        assert audit.broken_guards() == [f"empty {list(shape)} torch.float32"], shape


def test_a_fresh_complex_buffer_holds_random_leftovers():
    # PyTorch code that leaves part of a complex output unwritten must not match a zero result by chance
    with CandidateAudit(poison_seed=4):
        fresh = torch.empty(256, dtype=torch.complex64)
    assert float(fresh.real.std()) > 50 and float(fresh.imag.std()) > 50


def test_an_op_that_writes_only_into_its_out_tensors_carries_the_mark():
    # torch.split_copy(..., out=[...]) returns nothing: only its out tensors say where the values went
    x = torch.randn(16)
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        out = torch.empty(16)
        _launch(audit, [x, out], lambda: out.copy_(torch.exp(x)))
        halves = [torch.empty(8), torch.empty(8)]
        torch.split_copy(out, 8, out=halves)
        plain = [torch.empty(8), torch.empty(8)]
        torch.split_copy(x, 8, out=plain)
    assert all(audit.holds_triton_values(half) for half in halves)
    assert not any(audit.holds_triton_values(half) for half in plain)


def test_a_launch_copying_a_result_of_nan_alone_is_a_copy():
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        nan = torch.full((16,), float("nan"))  # a PyTorch result
        out = torch.empty(16)
        _launch(audit, [nan, out], lambda: out.copy_(nan))
    assert not audit.holds_triton_values(out)


def test_recording_ops_does_not_import_torchdynamo():
    # TorchDynamo takes seconds to import, at every candidate process's start; the audit needs none of it
    code = ("import sys, torch\nfrom drtriton_lsp.worker.op_audit import CandidateAudit\n"
            "with CandidateAudit(track_triton_values=True):\n    torch.relu(torch.empty(3))\n"
            "print('torch._dynamo' in sys.modules)")
    finished = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert finished.stdout.strip() == "False"


def test_values_computed_in_the_forward_are_told_from_values_made_on_the_host_and_moved_in():
    """PyTorch results, Triton results and copies of either hold values computed here; a tensor built from plain
    Python numbers (or copied from one, by PyTorch or by a launch) does not."""
    x = torch.randn(16)
    with torch.no_grad(), CandidateAudit(track_triton_values=True) as audit:
        by_pytorch = torch.relu(x)
        by_triton = torch.empty(16)
        _launch(audit, [x, by_triton], lambda: by_triton.copy_(torch.exp(x)))
        copied = torch.empty(16)
        copied.copy_(by_pytorch)
        from_host = torch.tensor([max(value, 0.0) for value in x.tolist()])
        launched_copy = torch.empty(16)
        _launch(audit, [from_host, launched_copy], lambda: launched_copy.copy_(from_host))
    assert all(audit.holds_computed_values(value) for value in (by_pytorch, by_triton, copied))
    assert not audit.holds_computed_values(from_host) and not audit.holds_computed_values(launched_copy)
    assert not audit.holds_computed_values(x)
