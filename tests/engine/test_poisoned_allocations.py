"""While a candidate runs, fresh allocations hold the poison value, so an output it never writes
cannot match by luck; afterwards torch's allocators are exactly as before.
"""

from __future__ import annotations

import torch

from drtriton_lsp.engine.verify_worker import poisoned_allocations


def test_every_empty_allocator_returns_poisoned_memory_and_is_restored():
    originals = (torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty)
    with poisoned_allocations(12345.0):
        fresh = [
            torch.empty(3, 5),
            torch.empty_like(torch.zeros(7)),
            torch.empty_strided((2, 3), (3, 1)),
            torch.zeros(1).new_empty(4),
        ]
        assert all(bool((t == 12345.0).all()) for t in fresh)
        assert torch.empty(4, dtype=torch.int64).dtype == torch.int64  # integer buffers are left alone
    with poisoned_allocations(float("nan")):
        assert bool(torch.empty(6).isnan().all())
    assert (torch.empty, torch.empty_like, torch.empty_strided, torch.Tensor.new_empty) == originals
