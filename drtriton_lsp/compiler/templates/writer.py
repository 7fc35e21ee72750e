"""The writer kit every template shares: the device its defaults are tuned for, the kernel writer base (reserved
names, combine helpers, a kernel's and a module's layout), a wrapper's launch lines and index splits.
"""

from __future__ import annotations

import textwrap
from typing import Sequence

from drtriton_lsp.compiler.graph import Dim
from drtriton_lsp.compiler.names import NameScope
from drtriton_lsp.compiler.templates.base import KernelPlan, RenderContext
from drtriton_lsp.compiler.templates.fold import COMBINE_HELPERS
from drtriton_lsp.compiler.templates.pointwise import INDENT, flat_index_lines

# streaming multiprocessors of an NVIDIA H200, the GPU the defaults are tuned for: fewer programs (or output tiles)
# than a few per SM leave SMs idle
H200_STREAMING_MULTIPROCESSORS = 132
# kernel docstrings wrap at this width
DOCSTRING_WIDTH = 96


def part_index_lines(
    domain: tuple[Dim, ...], part: Sequence[int], needed: list[int], flat: str, scope: NameScope
) -> tuple[list[str], dict[int, str], dict[int, str]]:
    """Statements splitting `flat`, a row-major position over the dims `part` of `domain`, into the
    indices of the `needed` dims: (statements, index per needed dim, size parameter per dim divided by).

    A part with one dim of size other than 1 needs no split: `flat` is that dim's index.
    """
    varying = [dim for dim in part if domain[dim] != 1]
    if len(varying) == 1:
        return [], {dim: flat for dim in needed}, {}
    view = tuple(size if dim in part else 1 for dim, size in enumerate(domain))
    return flat_index_lines(view, needed, flat, scope)


def product_text(terms: list[str]) -> str:
    return " * ".join(terms) if terms else "1"


def tuple_text(items: list[str]) -> str:
    return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"


class KernelWriter:
    """What the reduce, scan and row kernels share: reserved names, combine helpers, the source's layout."""

    # names the kernel body spells literally; subclasses list theirs
    fixed_names: tuple[str, ...] = ()

    def __init__(self, plan: KernelPlan, context: RenderContext):
        self.plan = plan
        self.context = context
        self.graph = context.graph
        self.nodes = {node.name: node for node in self.graph.nodes}
        self.scope = context.scope()
        # taking the fixed names first renames any graph value called so
        for fixed in self.fixed_names:
            self.scope.fresh(fixed)
        self.variables: dict[str, str] = {}
        self.helper_sources: list[str] = []
        self.helper_names: dict[str, str] = {}

    def helper(self, kind: str) -> str:
        """The name of a module-level combine function this kernel calls, defined before the kernel."""
        if kind not in self.helper_names:
            self.helper_names[kind] = self.scope.fresh(f"{self.plan.wrapper}_{kind}")
            self.helper_sources.append(COMBINE_HELPERS[kind].format(name=self.helper_names[kind]))
        return self.helper_names[kind]

    def kernel_source(self, name: str, parameters: list[str], summary: str, details: str, body: list[str]) -> str:
        """One `@triton.jit` kernel; its docstring is the summary line, a blank line and the wrapped details."""
        lines = ["@triton.jit", f"def {name}("]
        lines += [f"{INDENT}{parameter}," for parameter in parameters]
        lines += ["):", f'{INDENT}"""{summary}', ""]
        lines += [f"{INDENT}{line}" for line in textwrap.wrap(details, DOCSTRING_WIDTH)]
        lines.append(f'{INDENT}"""')
        lines += [f"{INDENT}{line}" for line in body]
        return "\n".join(lines) + "\n"

    def module_source(self, kernels: list[str], wrapper: str) -> str:
        """The combine helpers the kernels call, the kernels, then the wrapper."""
        return "\n\n".join(self.helper_sources + kernels + [wrapper])

def launch_lines(kernel: str, grid: str, arguments: list[str]) -> list[str]:
    """`kernel[grid](...)`, one argument per line, inside a wrapper."""
    return [f"{INDENT}{kernel}[{grid}]("] + [f"{INDENT * 2}{argument}," for argument in arguments] + [f"{INDENT})"]
