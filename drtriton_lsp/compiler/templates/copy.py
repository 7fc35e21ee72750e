"""The copy template: cat, stack and repeat as one kernel that fills the output by index arithmetic.

Each output element finds the input element it copies and reads it through that input's strides; an epilogue may follow.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from drtriton_lsp.compiler.elementwise import FUSIBLE_DTYPES, bind_arguments
from drtriton_lsp.compiler.graph import Dim, OpGraph, OpNode
from drtriton_lsp.compiler.partition import group_inputs
from drtriton_lsp.compiler.templates.base import AnchorShape, KernelPlan, RenderContext, Template, power_of_two
from drtriton_lsp.compiler.templates.pointwise import (
    INDENT,
    DomainReads,
    domain_text,
    elementwise_lines,
    flat_index_lines,
    stored,
)

# the ops this template computes: each output element is an input element
COPY_OPS = ("aten.cat.default", "aten.stack.default", "aten.repeat.default")
# more inputs than this stay in PyTorch: every output element would test each input's range
MAX_PIECES = 16
KERNEL_NAMES = ("pid", "offsets", "flat", "mask", "numel", "inside", "INT32_INDICES", "BLOCK")


@dataclass(frozen=True)
class Copy:
    """What one copy op computes: kind "cat", "stack" or "repeat", its inputs (in order), dim or repeats."""

    kind: str
    pieces: tuple[str, ...]
    dim: int = 0
    repeats: tuple[int, ...] = ()


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def copy_of(node: OpNode, graph: OpGraph) -> Copy | None:
    """The copy `node` computes, if this template computes it exactly as PyTorch does; else None."""
    if node.op not in COPY_OPS or len(node.outputs) != 1:
        return None
    bound = bind_arguments(node)
    output = node.spec
    if node.op == "aten.repeat.default":
        source, repeats = bound["self"], bound["repeats"]
        items = repeats.get("list") if isinstance(repeats, dict) else None
        if not (isinstance(source, dict) and "ref" in source) or items is None or not all(_int(item) for item in items):
            return None
        pieces = (source["ref"],)
    else:
        tensors = bound["tensors"]
        items = tensors.get("list") if isinstance(tensors, dict) else None
        if not items or len(items) > MAX_PIECES or not all(isinstance(item, dict) and "ref" in item for item in items):
            return None
        pieces = tuple(item["ref"] for item in items)
    specs = [graph.spec_of(piece) for piece in pieces]
    if output.dtype not in FUSIBLE_DTYPES or any(spec is None or spec.dtype != output.dtype for spec in specs):
        return None
    if node.op == "aten.repeat.default":
        repeats = tuple(items)
        if len(repeats) < specs[0].rank or min(repeats, default=1) < 1:
            return None
        return Copy("repeat", pieces, repeats=repeats)
    rank = output.rank if node.op == "aten.cat.default" else output.rank - 1
    dim = bound["dim"]
    if not _int(dim) or not -output.rank <= dim < output.rank or any(spec.rank != rank for spec in specs):
        return None
    dim %= output.rank
    if node.op == "aten.stack.default":
        # the inputs must have one shape (PyTorch raises otherwise), known here from the graph
        return Copy("stack", pieces, dim) if len({spec.shape for spec in specs}) == 1 else None
    others = {tuple(size for axis, size in enumerate(spec.shape) if axis != dim) for spec in specs}
    return Copy("cat", pieces, dim) if len(others) == 1 else None


class CopyTemplate(Template):
    """cat / stack / repeat: each output element copies one input element, found by index arithmetic."""

    name = "copy"
    summary = "cat, stack, repeat"
    parameters = (
        power_of_two("block", 64, 8192, "output elements each program copies"),
        power_of_two("warps", 1, 16, "warps per program"),
    )

    def anchor(self, node: OpNode, graph: OpGraph) -> AnchorShape | None:
        copy = copy_of(node, graph)
        if copy is None:
            return None
        # several inputs have no single input domain, so no prologue; the epilogue runs on the output
        return AnchorShape(None, (), node.spec.shape)

    def default_parameters(self, plan: KernelPlan, graph: OpGraph) -> dict[str, Any]:
        return {"block": 1024, "warps": 4}

    def render(self, plan: KernelPlan, context: RenderContext) -> str:
        return CopyKernel(plan, context).render()


class CopyKernel:
    """Source of one copy kernel and its launch wrapper."""

    def __init__(self, plan: KernelPlan, context: RenderContext):
        self.plan = plan
        self.graph = context.graph
        self.context = context
        self.nodes = {node.name: node for node in self.graph.nodes}
        anchor = self.nodes[plan.anchor]
        self.copy = copy_of(anchor, self.graph)
        self.domain: tuple[Dim, ...] = tuple(anchor.spec.shape)
        self.dtype = anchor.spec.dtype
        self.scope = context.scope()
        for fixed in KERNEL_NAMES:
            self.scope.fresh(fixed)
        self.result = self.scope.fresh(plan.anchor)
        # one read per piece, even where a value appears twice (cat([x, y, x])): each has its own range
        self.piece_reads: list[DomainReads] = []
        self.piece_variables: list[str] = []
        for piece in self.copy.pieces:
            variables: dict[str, str] = {}
            shape = self.graph.spec_of(piece).shape
            self.piece_reads.append(DomainReads(self.graph, shape, [piece], self.scope, variables, flat_fast_path=False))
            self.piece_variables.append(variables[piece])
        self.epilogue_variables: dict[str, str] = {plan.anchor: self.result}
        epilogue_values = [value for value in group_inputs(self.nodes, plan.epilogue) if value != plan.anchor]
        self.epilogue_reads = DomainReads(
            self.graph, self.domain, epilogue_values, self.scope, self.epilogue_variables, flat_fast_path=True
        )
        kind, dim = self.copy.kind, self.copy.dim
        # boundaries along the cat dim: piece k covers [starts[k], starts[k + 1])
        self.starts = [self.scope.fresh(f"start{k}") for k in range(1, len(self.copy.pieces))] if kind == "cat" else []
        self.piece_sizes: dict[int, str] = {}
        if kind == "repeat":
            lead = len(self.copy.repeats) - self.graph.spec_of(self.copy.pieces[0]).rank
            self.piece_sizes = {
                axis: self.scope.fresh(f"input_size{axis}")
                for axis, repeat in enumerate(self.copy.repeats[lead:])
                if repeat > 1
            }
        needed = set(self.epilogue_reads.indexed_dims)
        for reads in self.piece_reads:
            needed |= {self._output_dim(axis) for axis in reads.indexed_dims}
        if kind != "repeat" and self.domain[dim] != 1 and len(self.copy.pieces) > 1:
            needed.add(dim)
        self.index_lines, self.index, self.size_names = flat_index_lines(self.domain, sorted(needed), "flat", self.scope)

    def _output_dim(self, axis: int) -> int:
        """The output dim that input dim `axis` runs along."""
        copy = self.copy
        if copy.kind == "stack":
            return axis if axis < copy.dim else axis + 1
        if copy.kind == "repeat":
            return axis + len(copy.repeats) - self.graph.spec_of(copy.pieces[0]).rank
        return axis

    def _piece_index(self, piece: int, axis: int) -> str:
        """Index into piece `piece` along its dim `axis`, from the output element's indices."""
        copy = self.copy
        index = self.index[self._output_dim(axis)]
        if copy.kind == "cat" and axis == copy.dim and piece > 0:
            return f"({index} - {self.starts[piece - 1]})"
        if copy.kind == "repeat" and axis in self.piece_sizes:
            return f"({index} % {self.piece_sizes[axis]})"
        return index

    def render(self) -> str:
        plan, copy = self.plan, self.copy
        body = [
            "pid = tl.program_id(0)",
            "# int64 offsets: the output may hold more than 2**31 elements",
            "offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
            "# mask guards the last block",
            "mask = offsets < numel",
        ]
        if self.index_lines:
            body += [
                "# split each flat output offset into the indices of its dims: in int32 where the offsets fit (a 64-bit",
                "# division costs several 32-bit ones), widened to int64 before they meet strides",
                "if INT32_INDICES:",
                f"{INDENT}flat = offsets.to(tl.int32)",
                "else:",
                f"{INDENT}flat = offsets",
            ]
            body += self.index_lines
            body += [f"{index} = {index}.to(tl.int64)" for index in self.index.values()]
        pieces = len(copy.pieces)
        if pieces == 1:
            reads = self.piece_reads[0]
            index_of_dim = {axis: self._piece_index(0, axis) for axis in reads.indexed_dims}
            body += reads.load_lines(index_of_dim, "mask")
            body.append(f"{self.result} = {self.piece_variables[0]}")
        else:
            body.append(f"{self.result} = tl.zeros([BLOCK], tl.float32)")
            selector = self.index.get(copy.dim, "0")
            for piece, reads in enumerate(self.piece_reads):
                index_of_dim = {axis: self._piece_index(piece, axis) for axis in reads.indexed_dims}
                if copy.kind == "stack":
                    condition = f"{selector} == {piece}"
                elif piece == 0:
                    condition = f"{selector} < {self.starts[0]}"
                elif piece == pieces - 1:
                    condition = f"{selector} >= {self.starts[-1]}"
                else:
                    condition = f"({selector} >= {self.starts[piece - 1]}) & ({selector} < {self.starts[piece]})"
                body.append(f"# piece {piece} ({copy.pieces[piece]}) fills the elements where {condition}")
                body.append(f"inside = mask & ({condition})")
                body += reads.load_lines(index_of_dim, "inside")
                body.append(f"{self.result} = tl.where(inside, {self.piece_variables[piece]}, {self.result})")
        if plan.epilogue:
            body += self.epilogue_reads.load_lines(self.index, "mask", flat_offsets="offsets")
            body += elementwise_lines(self.graph, plan.epilogue, self.epilogue_variables, self.scope, self.context.helpers)
        pointers = {value: self.scope.fresh(f"{value}_ptr") for value in plan.outputs}
        body.append("# the outputs are new contiguous tensors: an element's offset is its flat index")
        for value in plan.outputs:
            dtype = self.dtype if value == plan.anchor else self.graph.spec_of(value).dtype
            value_stored = stored(self.epilogue_variables[value], dtype)
            body.append(f"tl.store({pointers[value]} + offsets, {value_stored}, mask=mask)")

        parameters = (
            [pointer for reads in self.piece_reads for pointer in reads.pointer_parameters()]
            + self.epilogue_reads.pointer_parameters()
            + list(pointers.values())
            + ["numel"]
            + list(self.size_names.values())
            + self.starts
            + list(self.piece_sizes.values())
            + [stride for reads in self.piece_reads for stride in reads.stride_parameters()]
            + self.epilogue_reads.stride_parameters()
            + self.epilogue_reads.flag_parameters()
            + (["INT32_INDICES: tl.constexpr"] if self.index_lines else [])
            + ["BLOCK: tl.constexpr"]
        )
        replaced = f"{self.nodes[plan.anchor].op} ({plan.anchor})"
        if plan.epilogue:
            replaced += ", then " + ", ".join(f"{self.nodes[name].op} ({name})" for name in plan.epilogue)
        how = {
            "cat": f"the piece whose range along dim {copy.dim} holds it",
            "stack": f"piece number i, i its index along the new dim {copy.dim}",
            "repeat": "the input element at its indices modulo the input's sizes",
        }[copy.kind]
        lines = ["@triton.jit", f"def {plan.kernel}("]
        lines += [f"{INDENT}{parameter}," for parameter in parameters]
        lines += [
            "):",
            f'{INDENT}"""Replaces {replaced}.',
            "",
            f"{INDENT}Each program fills BLOCK elements of the {domain_text(self.domain)} output; each copies",
            f"{INDENT}{how}, read through that input's strides.",
            f'{INDENT}"""',
        ]
        lines += [f"{INDENT}{line}" for line in body]
        return "\n".join(lines) + "\n\n\n" + self._wrapper()

    def _wrapper(self) -> str:
        plan, graph, copy = self.plan, self.graph, self.copy
        scope = self.context.scope()
        tensors = {value: scope.fresh(value) for value in plan.inputs}
        outputs = {value: scope.fresh(value) for value in plan.outputs}
        output_shape, numel, block, grid = (scope.fresh(name) for name in ("output_shape", "numel", "BLOCK", "grid"))
        first = tensors[copy.pieces[0]]
        returned = ", ".join(outputs.values())
        lines = [f'"""Computes {", ".join(plan.nodes)} in one launch of {plan.kernel}; returns {returned}."""']
        starts: list[str] = []
        if copy.kind == "cat":
            dim = copy.dim
            running = f"{first}.shape[{dim}]"
            for start in self.starts:
                variable = scope.fresh(start)
                lines.append(f"{variable} = {running}")
                starts.append(variable)
                running = f"{variable} + {tensors[copy.pieces[len(starts)]]}.shape[{dim}]"
            lines.append(f"{output_shape} = (*{first}.shape[:{dim}], {running}, *{first}.shape[{dim + 1}:])")
        elif copy.kind == "stack":
            dim = copy.dim
            lines.append(f"{output_shape} = (*{first}.shape[:{dim}], {len(copy.pieces)}, *{first}.shape[{dim}:])")
        else:
            lead = len(copy.repeats) - graph.spec_of(copy.pieces[0]).rank
            padded = f"(1,) * {lead} + tuple({first}.shape)" if lead else f"tuple({first}.shape)"
            lines.append(f"{output_shape} = tuple(size * repeat for size, repeat in zip({padded}, {copy.repeats!r}))")
        for value, variable in outputs.items():
            dtype = self.dtype if value == plan.anchor else graph.spec_of(value).dtype
            lines.append(f"{variable} = torch.empty({output_shape}, dtype=torch.{dtype}, device={first}.device)")
        lines.append(f"{numel} = {next(iter(outputs.values()))}.numel()")
        piece_strides = [
            f"{tensors[piece]}.stride({axis})"
            for piece, reads in zip(copy.pieces, self.piece_reads)
            for axis in reads.reads[0].strides
        ]
        epilogue_lines, epilogue_strides, flags = self.epilogue_reads.wrapper_arguments(tensors, scope)
        lines += epilogue_lines
        lines += [
            f"{block} = {plan.params['block']}",
            f"# one program per block of {block} output elements",
            f"{grid} = (triton.cdiv({numel}, {block}),)",
            f"{plan.kernel}[{grid}](",
        ]
        arguments = (
            [tensors[piece] for piece in copy.pieces]
            + [tensors[read.value] for read in self.epilogue_reads.reads]
            + list(outputs.values())
            + [numel]
            + [f"{output_shape}[{dim}]" for dim in self.size_names]
            + starts
            + [f"{first}.shape[{axis}]" for axis in self.piece_sizes]
            + piece_strides
            + epilogue_strides
            + flags
            + ([f"INT32_INDICES={numel} + {block} <= 2**31"] if self.index_lines else [])
            + [f"BLOCK={block}", f"num_warps={plan.params['warps']}"]
        )
        lines += [f"{INDENT}{argument}," for argument in arguments]
        lines += [")", f"return {', '.join(outputs.values())}"]
        header = f"def {plan.wrapper}({', '.join(tensors.values())}):"
        return "\n".join([header] + [INDENT + line for line in lines]) + "\n"
