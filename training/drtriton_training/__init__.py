"""drtriton's training package: synthetic training data (CSP-DAG synthesis) and, later, training.

Part 1 (this release): the operator registry, the CP-SAT program generator and datasets.
"""

from __future__ import annotations

from drtriton_lsp.compiler import aten_schemas
from drtriton_lsp.compiler.aten_schemas import OpSchema


def _schema_from_torch(op: str) -> OpSchema | None:
    from drtriton_lsp.worker.op_schemas import read_schema  # torch loads only when a graph's op needs it

    return read_schema(op)


# Training compiles graphs it read back from datasets and capture replies without their schemas; it has torch, so the
# compiler reads an op's schema from torch the first time it meets the op.
aten_schemas.read_unknown_ops_with(_schema_from_torch)
