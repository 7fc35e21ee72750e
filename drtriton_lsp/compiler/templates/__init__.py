"""The kernel templates the compiler knows, by the name schedule scripts use for them.

Order matters once: the first anchor template that claims an op computes it by default.
"""

from __future__ import annotations

from drtriton_lsp.compiler.graph import OpGraph, OpNode
from drtriton_lsp.compiler.templates.base import AnchorShape, Template
from drtriton_lsp.compiler.templates.conv import ConvTemplate
from drtriton_lsp.compiler.templates.copy import CopyTemplate
from drtriton_lsp.compiler.templates.loss import LossTemplate
from drtriton_lsp.compiler.templates.matmul import MatmulTemplate
from drtriton_lsp.compiler.templates.normalize import NormalizeTemplate
from drtriton_lsp.compiler.templates.pointwise import PointwiseTemplate
from drtriton_lsp.compiler.templates.pool import PoolTemplate
from drtriton_lsp.compiler.templates.reduce import ReduceTemplate, ScanTemplate
from drtriton_lsp.compiler.templates.row import RowTemplate

POINTWISE = PointwiseTemplate()
ROW = RowTemplate()
TEMPLATES: dict[str, Template] = {template.name: template for template in (POINTWISE, MatmulTemplate(), ConvTemplate(), PoolTemplate(), LossTemplate(), CopyTemplate(), NormalizeTemplate(), ReduceTemplate(), ScanTemplate(), ROW)}


def anchor_of(node: OpNode, graph: OpGraph) -> tuple[Template, AnchorShape] | None:
    """The first template that anchors a kernel on `node`, with the kernel's shape; None if none does."""
    for template in TEMPLATES.values():
        shape = template.anchor(node, graph)
        if shape is not None:
            return template, shape
    return None
