"""The default operator registry, assembled family by family.

`default_registry()` is what synthesis samples from; its order is fixed, which keeps seeds stable.
"""

from __future__ import annotations

from functools import lru_cache

from drtriton_training.operators import elementwise, layers, losses, reductions, shape_ops
from drtriton_training.registry import OperatorRegistry


@lru_cache(maxsize=1)
def default_registry() -> OperatorRegistry:
    registry = OperatorRegistry()
    for family in (elementwise, reductions, layers, losses, shape_ops):
        family.register(registry)
    return registry
