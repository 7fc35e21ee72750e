"""The pointwise template: fused elementwise ops over one domain, plus the pieces other templates reuse.

`DomainReads` loads graph values broadcast into any iteration domain and `elementwise_lines` computes
fused ops on them, so prologues and epilogues of reduce, matmul and pooling kernels read like this one.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Collection, Sequence

from drtriton_lsp.compiler.elementwise import (
    INTEGER_DTYPES,
    TRITON_DTYPES,
    DeviceHelpers,
    OpRendering,
    TensorOperand,
    bind_arguments,
)
from drtriton_lsp.compiler.fusible import FUSIBLE_OPS
from drtriton_lsp.compiler.gather import GATHER_OPS, lookup_operands, read_members, reads_of
from drtriton_lsp.compiler.graph import Dim, OpGraph, OpNode, TensorSpec
from drtriton_lsp.compiler.names import NameScope
from drtriton_lsp.compiler.reshape_reads import (
    RESHAPE_OPS,
    example_level_counts,
    reshape_source,
    source_expression,
    target_shape_expression,
)
from drtriton_lsp.compiler.templates.base import KernelPlan, RenderContext, Template, power_of_two

INDENT = "    "


@dataclass(frozen=True)
class DomainRead:
    """How a kernel reads one graph value: pointer, per-dimension strides, optional fast path."""

    value: str
    spec: TensorSpec
    variable: str
    pointer: str
    strides: dict[int, str]  # domain dim -> stride parameter, for dims the value varies along
    contiguous_flag: str | None  # set when the value may be a contiguous tensor of the domain's shape
    lookup: "TableLookup | None" = None  # set when the value is an embedding lookup, gathered as it is read
    reshaped: "ReshapedSource | None" = None  # set when the value is a reshape, read through its source's strides


@dataclass(frozen=True)
class TableLookup:
    """A value read as rows of `table` gathered at `indices` (an embedding lookup), never stored.

    `DomainRead.pointer` is the indices' pointer and `DomainRead.strides` their strides (the dims they vary along),
    plus the table's column stride on the domain's last dim; the row stride and row count come as scalars.
    """

    table: str
    indices: str
    table_pointer: str
    row_stride: str
    row_count: str
    column_dim: int | None  # the domain dim the table's columns run along (None: a table of one column)
    row: str
    in_range: str


@dataclass(frozen=True)
class ReshapedSource:
    """A value read as `source.reshape(...)` through the source's own strides (`compiler.reshape_reads`), never copied.

    Each dim the value varies along is read in levels, outermost first: `DomainRead.strides` holds its outermost
    level's stride parameter, `level_strides` every level's and `inner_sizes` the sizes of all levels but the
    outermost. counts: the levels of every dim of the value, as the wrapper's host function is asked for them.
    """

    node: OpNode
    source: str
    counts: tuple[int, ...]
    level_strides: dict[int, tuple[str, ...]]
    inner_sizes: dict[int, tuple[str, ...]]


@dataclass(frozen=True)
class ReshapedWrapperValues:
    """The launch wrapper's variables for one reshaped read: the tensor read, its reshaped shape, levels' sizes and
    strides (what the host function returned)."""

    tensor: str
    shape: str
    sizes: str
    strides: str


class DomainReads:
    """Graph values read into a kernel's iteration domain, broadcasting like PyTorch.

    A value of lower rank aligns with the domain's trailing dims; size-1 dims broadcast (no stride
    parameter, index ignored). `flat_fast_path`: the kernel also has flat offsets into a contiguous
    domain, so a contiguous full-shape value can be read at those offsets instead of through strides.
    `gathered`: the kernel's read members (`gather.read_members`): an embedding lookup's value is read as a gather of
    its table's rows at its indices, a reshape's through its source's strides. A wrapper calls `setup_lines` first
    when the kernel reads a reshape.
    """

    def __init__(
        self,
        graph: OpGraph,
        domain: tuple[Dim, ...],
        values: Sequence[str],
        scope: NameScope,
        variables: dict[str, str],
        *,
        flat_fast_path: bool,
        gathered: Collection[str] = (),
    ):
        self.domain = domain
        varying_dims = [dim for dim, size in enumerate(domain) if size != 1]
        nodes = {node.name: node for node in graph.nodes if node.name in gathered}
        self.graph = graph
        self.reads: list[DomainRead] = []
        # per reshaped read's value, the wrapper's variables (`setup_lines`)
        self.reshaped_wrapper_values: dict[str, ReshapedWrapperValues] = {}
        for value in values:
            spec = graph.spec_of(value)
            variables[value] = scope.fresh(value)
            offset = len(domain) - spec.rank
            dims = [dim for dim in varying_dims if dim >= offset and spec.shape[dim - offset] != 1]
            full_shape = flat_fast_path and dims and spec.shape == domain
            if value in nodes and nodes[value].op in RESHAPE_OPS:
                flag = scope.fresh(f"{variables[value]}_is_contiguous".upper()) if full_shape else None
                self.reads.append(_reshaped_read(nodes[value], graph, variables[value], dims, offset, flag, scope))
                continue
            if value in nodes:
                self.reads.append(_lookup_read(nodes[value], spec, variables[value], dims, len(domain), scope))
                continue
            pointer = scope.fresh(f"{variables[value]}_ptr")
            strides = {dim: scope.fresh(f"{variables[value]}_stride{dim}") for dim in dims}
            flag = scope.fresh(f"{variables[value]}_is_contiguous".upper()) if full_shape else None
            self.reads.append(DomainRead(value, spec, variables[value], pointer, strides, flag))

    @property
    def indexed_dims(self) -> list[int]:
        """Domain dims some value is read along through a stride: the kernel needs their indices."""
        return sorted({dim for read in self.reads for dim in read.strides})

    def pointer_parameters(self) -> list[str]:
        return [pointer for read in self.reads for pointer in _pointers(read)]

    def setup_lines(self, tensors: dict[str, str], scope: NameScope, helpers: DeviceHelpers) -> list[str]:
        """The wrapper's first statements: each reshaped read's tensor, shape and levels, from the host function (see
        `reshape_reads`); the other methods' wrapper expressions name them."""
        lines: list[str] = []
        for read in self.reads:
            if read.reshaped is None:
                continue
            reshaped = read.reshaped
            source = tensors[reshaped.source]
            parts = ("read", "shape", "sizes", "strides")
            names = ReshapedWrapperValues(*(scope.fresh(f"{read.variable}_{part}") for part in parts))
            self.reshaped_wrapper_values[read.value] = names
            shape = target_shape_expression(
                reshaped.node, self.graph, source, lambda encoded: _wrapper_value(encoded, tensors)
            )
            lines += [
                f"# {read.value} ({reshaped.node.op} of {source}): read where its elements lie, through {source}'s",
                "# strides (copied first only where they do not allow it)",
                f"{names.tensor}, {names.shape}, {names.sizes}, {names.strides} = "
                f"{helpers.name_of('read_levels')}({source_expression(reshaped.node, self.graph, source)}, {shape}, "
                f"{list(reshaped.counts)})",
            ]
        return lines

    def _contiguity(self, read: DomainRead, tensors: dict[str, str], memory_format: str | None) -> str:
        """A wrapper expression: whether `read`'s tensor lies at the flat offsets (row-major, or in `memory_format`).
        A reshaped read's tensor does when it is row-major itself (the reshape of a row-major tensor is), and the
        offsets run row-major."""
        if read.reshaped is None:
            return f"{tensors[read.value]}.is_contiguous({f'memory_format={memory_format}' if memory_format else ''})"
        contiguous = f"{self.reshaped_wrapper_values[read.value].tensor}.is_contiguous()"
        return f"{contiguous} and {memory_format} is torch.contiguous_format" if memory_format else contiguous

    def reshape_inputs(self) -> set[str]:
        """The graph values the reshaped reads' setup names: their sources and the sizes in their shapes."""
        return {value for read in self.reads if read.reshaped for value in read.reshaped.node.input_refs()}

    def pointer_arguments(self, tensors: dict[str, str]) -> list[str]:
        """The wrapper's tensors for `pointer_parameters`, in their order (tensors: graph value -> wrapper variable)."""
        arguments = []
        for read in self.reads:
            if read.reshaped is not None:
                arguments.append(self.reshaped_wrapper_values[read.value].tensor)
            else:
                arguments += [tensors[value] for value in _pointer_values(read)]
        return arguments

    def stride_parameters(self) -> list[str]:
        """Each read's strides; an embedding lookup's then its table's row stride and row count; a reshape's levels'
        strides and inner sizes per dim."""
        parameters: list[str] = []
        for read in self.reads:
            if read.reshaped is not None:
                for dim in read.strides:
                    parameters += read.reshaped.level_strides[dim] + read.reshaped.inner_sizes[dim]
                continue
            parameters += read.strides.values()
            if read.lookup is not None:
                parameters += [read.lookup.row_stride, read.lookup.row_count]
        return parameters

    def shape_of(self, read: DomainRead, tensors: dict[str, str]) -> str:
        """An expression for the shape of `read`'s value at run time, in the wrapper."""
        if read.reshaped is not None:
            return self.reshaped_wrapper_values[read.value].shape
        if read.lookup is None:
            return f"{tensors[read.value]}.shape"
        return f"({tensors[read.lookup.indices]}.shape + {tensors[read.lookup.table]}.shape[1:])"

    def flag_parameters(self) -> list[str]:
        return [f"{read.contiguous_flag}: tl.constexpr" for read in self.reads if read.contiguous_flag]

    def load_lines(
        self,
        index_of_dim: dict[int, str],
        mask: str | None,
        flat_offsets: str | None = None,
        values: Collection[str] | None = None,
        narrow_mask: tuple[Collection[int], str] | None = None,
    ) -> list[str]:
        """Statements loading every value (or only `values`) as float32 (bool stays int1) at the given domain indices.

        index_of_dim: an index expression per indexed dim (broadcastable, e.g. "rows[:, None]"). narrow_mask: (dims,
        mask) where `mask` guards any load indexed along those dims only, in their broadcast shape: an embedding
        lookup's row indices are then loaded once per row instead of once per element (e.g. "row_mask[:, None]").
        """
        reads = [read for read in self.reads if values is None or read.value in values]
        lines: list[str] = []
        if any(read.contiguous_flag for read in reads):
            lines.append("# a contiguous input of the domain's shape is read straight at the flat offsets")
        masked = f", mask={mask}" if mask else ""
        for read in reads:
            convert = _float_conversion(read.spec.dtype)
            if read.lookup is not None:
                lines += _lookup_lines(read, index_of_dim, mask, convert, narrow_mask)
                continue
            if not read.strides:
                lines += [
                    f"# {read.variable} holds one element, the same for the whole domain",
                    f"{read.variable} = tl.load({read.pointer}){convert}",
                ]
                continue
            if read.reshaped is not None:
                lines.append(f"# {read.variable}: {read.reshaped.source} reshaped, read in levels of its strides")
                strided = " + ".join(_level_terms(read, dim, index_of_dim[dim]) for dim in read.strides)
            else:
                strided = _strided_offsets(read, index_of_dim)
            strided_load = f"{read.variable} = tl.load({read.pointer} + {strided}{masked}){convert}"
            if read.contiguous_flag is None or flat_offsets is None:
                if len(read.strides) < sum(1 for size in self.domain if size != 1):
                    dims = ", ".join(str(dim) for dim in read.strides)
                    plural = "s" if len(read.strides) > 1 else ""
                    lines.append(
                        f"# {read.variable} broadcasts: of the domain's {len(self.domain)} dims "
                        f"it varies along dim{plural} {dims} only"
                    )
                lines.append(strided_load)
                continue
            lines += [
                f"if {read.contiguous_flag}:",
                f"{INDENT}{read.variable} = tl.load({read.pointer} + {flat_offsets}{masked}){convert}",
                "else:",
                f"{INDENT}{strided_load}",
            ]
        return lines

    def wrapper_arguments(
        self, tensors: dict[str, str], scope: NameScope, *, memory_format: str | None = None
    ) -> tuple[list[str], list[str], list[str]]:
        """For the launch wrapper: (statements, stride arguments, contiguity flag arguments).

        tensors: graph value -> the wrapper's variable holding it; memory_format: an expression for the layout the
        flat offsets run over (row-major when None): a value is read at them when it is contiguous in that layout.
        A read's strides are its tensor's own, taken at the dims it varies along: a value of lower rank aligns with
        the domain's trailing dims, and the dims it broadcasts along (size 1) have no stride parameter. That is what
        `expand(domain).stride()` would give at those dims, without building the view (several microseconds a read).
        """
        lines: list[str] = []
        stride_arguments: list[str] = []
        for read in self.reads:
            if read.lookup is not None:
                lookup_lines, lookup_arguments = _lookup_arguments(read, tensors, len(self.domain), scope)
                lines += lookup_lines
                stride_arguments += lookup_arguments
                continue
            if read.reshaped is not None:
                names = self.reshaped_wrapper_values[read.value]
                offset = len(self.domain) - read.spec.rank
                for dim in read.strides:
                    levels = read.reshaped.counts[dim - offset]
                    stride_arguments += [f"{names.strides}[{dim - offset}][{level}]" for level in range(levels)]
                    stride_arguments += [f"{names.sizes}[{dim - offset}][{level}]" for level in range(1, levels)]
                continue
            if not read.strides:
                continue
            tensor = tensors[read.value]
            strides = scope.fresh(f"{tensor}_strides")
            lines.append(f"{strides} = {tensor}.stride()")
            offset = len(self.domain) - read.spec.rank
            stride_arguments += [f"{strides}[{dim - offset}]" for dim in read.strides]
        flags = [
            f"{read.contiguous_flag}={self._contiguity(read, tensors, memory_format)}"
            for read in self.reads
            if read.contiguous_flag
        ]
        return lines, stride_arguments, flags


def _lookup_read(node, spec: TensorSpec, variable: str, dims: list[int], rank: int, scope: NameScope) -> DomainRead:
    """The read of an embedding lookup's value: its indices along every dim but the last, its table's row at each."""
    table, indices = lookup_operands(node)
    column_dim = rank - 1 if rank - 1 in dims else None
    strides = {dim: scope.fresh(f"{variable}_index_stride{dim}") for dim in dims if dim != column_dim}
    if column_dim is not None:
        strides[column_dim] = scope.fresh(f"{variable}_column_stride")
    lookup = TableLookup(
        table=table,
        indices=indices,
        table_pointer=scope.fresh(f"{variable}_table_ptr"),
        row_stride=scope.fresh(f"{variable}_row_stride"),
        row_count=scope.fresh(f"{variable}_row_count"),
        column_dim=column_dim,
        row=scope.fresh(f"{variable}_row"),
        in_range=scope.fresh(f"{variable}_in_range"),
    )
    return DomainRead(node.name, spec, variable, scope.fresh(f"{variable}_indices_ptr"), strides, None, lookup)


def _reshaped_read(
    node: OpNode, graph: OpGraph, variable: str, dims: list[int], offset: int, flag: str | None, scope: NameScope
) -> DomainRead:
    """The read of a reshape's value through its source's strides: each varying dim in its example level count
    (flag: the constexpr set when the tensor read is row-major, so read at the domain's flat offsets)."""
    counts = tuple(example_level_counts(node, graph))
    level_strides = {
        dim: tuple(scope.fresh(f"{variable}_stride{dim}_{level}") for level in range(counts[dim - offset]))
        for dim in dims
    }
    inner_sizes = {
        dim: tuple(scope.fresh(f"{variable}_size{dim}_{level}") for level in range(1, counts[dim - offset]))
        for dim in dims
    }
    reshaped = ReshapedSource(node, reshape_source(node), counts, level_strides, inner_sizes)
    strides = {dim: level_strides[dim][0] for dim in dims}
    return DomainRead(node.name, node.spec, variable, scope.fresh(f"{variable}_ptr"), strides, flag, reshaped=reshaped)


def _level_terms(read: DomainRead, dim: int, index: str) -> str:
    """The offset of `index` along a reshaped read's dim: its levels, outermost first, each index // (the inner
    levels' sizes) % (its own size) times its stride (the outermost needs no %, the innermost no //)."""
    strides, sizes = read.reshaped.level_strides[dim], read.reshaped.inner_sizes[dim]
    terms = []
    index = index if index.isidentifier() else f"({index})"
    for level, stride in enumerate(strides):
        inner = sizes[level:]
        term = index
        if inner:
            term = f"({term} // ({' * '.join(inner)}))" if len(inner) > 1 else f"({term} // {inner[0]})"
        if level > 0:
            term = f"({term} % {sizes[level - 1]})"
        terms.append(f"{term} * {stride}")
    return " + ".join(terms)


def _float_conversion(dtype: str) -> str:
    """What a loaded value of `dtype` is converted with: float32 as computed; bool stays int1 so it can serve as a
    condition, and integers stay as they are so they compare exactly (an op that computes with one converts it:
    elementwise.float_expression)."""
    return "" if dtype in ("float32", "bool") + INTEGER_DTYPES else ".to(tl.float32)"


def _strided_offsets(read: DomainRead, index_of_dim: dict[int, str]) -> str:
    """A plain read's element offsets through its strides, at the given domain indices."""
    return " + ".join(f"{index_of_dim[dim]} * {stride}" for dim, stride in read.strides.items())


def _wrapper_value(encoded, tensors: dict[str, str]) -> str:
    """A reshape's shape argument as wrapper source: graph values (sizes the forward computed) by their variables."""
    if isinstance(encoded, dict) and "ref" in encoded:
        return tensors[encoded["ref"]]
    if isinstance(encoded, dict) and "list" in encoded:
        return "[" + ", ".join(_wrapper_value(item, tensors) for item in encoded["list"]) + "]"
    return repr(encoded)


def _pointers(read: DomainRead) -> list[str]:
    return [read.pointer, read.lookup.table_pointer] if read.lookup else [read.pointer]


def _pointer_values(read: DomainRead) -> list[str]:
    return [read.lookup.indices, read.lookup.table] if read.lookup else [read.value]


def _lookup_lines(
    read: DomainRead,
    index_of_dim: dict[int, str],
    mask: str | None,
    convert: str,
    narrow_mask: tuple[Collection[int], str] | None,
) -> list[str]:
    """Statements gathering an embedding lookup's value: each element's row index, then the table at that row.

    An index outside the table reads 0 where PyTorch raises (an invalid input either way): never memory outside it.
    """
    lookup = read.lookup
    index_dims = [dim for dim in read.strides if dim != lookup.column_dim]
    index_terms = [f"{index_of_dim[dim]} * {read.strides[dim]}" for dim in index_dims]
    index_mask = mask
    if narrow_mask is not None and set(index_dims) <= set(narrow_mask[0]):
        # one index per row, loaded in the rows' shape: the gather's mask is then constant along the columns
        index_mask = narrow_mask[1]
    masked = f", mask={index_mask}" if index_mask else ""
    row_source = f"{read.pointer} + {' + '.join(index_terms)}" if index_terms else read.pointer
    row_offset = f"{lookup.row}.to(tl.int64) * {lookup.row_stride}"
    if lookup.column_dim is not None:
        row_offset += f" + {index_of_dim[lookup.column_dim]} * {read.strides[lookup.column_dim]}"
    in_range = f"({lookup.row} >= 0) & ({lookup.row} < {lookup.row_count})"
    gather_mask = f"{mask} & {lookup.in_range}" if mask else lookup.in_range
    return [
        f"# {read.variable}: rows of {lookup.table} gathered at {lookup.indices} (an embedding lookup, never stored)",
        f"{lookup.row} = tl.load({row_source}{masked})",
        f"{lookup.in_range} = {in_range}",
        f"{read.variable} = tl.load({lookup.table_pointer} + {row_offset}, mask={gather_mask}, other=0.0){convert}",
    ]


def _lookup_arguments(read: DomainRead, tensors: dict[str, str], domain_rank: int, scope: NameScope):
    """(statements, arguments) giving an embedding lookup's strides, row stride and row count, in the order of
    `DomainReads.stride_parameters`."""
    lookup = read.lookup
    table, indices = tensors[lookup.table], tensors[lookup.indices]
    strides = scope.fresh(f"{indices}_strides")
    # the indices align with the looked-up value's dims but its last (the table's columns)
    lines = [f"{strides} = {indices}.stride()"]
    offset = domain_rank - read.spec.rank
    arguments = [
        f"{table}.stride(1)" if dim == lookup.column_dim else f"{strides}[{dim - offset}]" for dim in read.strides
    ]
    return lines, arguments + [f"{table}.stride(0)", f"{table}.shape[0]"]


def flat_index_lines(
    domain: tuple[Dim, ...],
    indexed_dims: list[int],
    flat_offsets: str,
    scope: NameScope,
    *,
    memory_order: Sequence[int] | None = None,
    names: tuple[dict[int, str], dict[int, str]] | None = None,
    combine_divisions: bool = False,
) -> tuple[list[str], dict[int, str], dict[int, str]]:
    """Statements splitting flat offsets into the indices of `indexed_dims`.

    The offsets run over the domain row-major, or in `memory_order` (its dims outermost first: (0, 2, 3, 1) is
    channels-last). names: the (index, size) variables of an earlier call to reuse and extend, so two orders can
    fill the same index variables. combine_divisions: divide once by the product of the sizes of consecutive dims no
    index is taken along (one division instead of several; only where that product cannot overflow the sizes'
    integer type). Returns (statements, index variable per indexed dim, size parameter per dim the split divides
    by). Size-1 dims are skipped (their index is always 0).
    """
    index_names, size_names = names if names is not None else ({}, {})
    if not indexed_dims:
        return [], index_names, size_names
    order = [dim for dim in (memory_order or range(len(domain))) if domain[dim] != 1]
    for dim in indexed_dims:
        index_names.setdefault(dim, scope.fresh(f"index{dim}"))
    outermost_needed = min(indexed_dims, key=order.index)
    outermost = order[0]
    splitting = [dim for dim in reversed(order) if order.index(dim) >= order.index(outermost_needed)]
    lines: list[str] = []
    remainder = flat_offsets
    quotient_variable: str | None = None
    divisors: list[str] = []  # sizes the remainder is divided by before the next index is taken
    for dim in splitting:
        target = index_names[dim] if dim in indexed_dims else None
        if dim != outermost and dim not in size_names:
            size_names[dim] = scope.fresh(f"size{dim}")
        if target is None and combine_divisions:
            divisors.append(size_names[dim])
            continue
        if divisors:
            divisor = divisors[0] if len(divisors) == 1 else f"({' * '.join(divisors)})"
            divisors = []
            quotient = f"{remainder} // {divisor}"
            if dim == outermost:
                remainder = quotient
            else:
                quotient_variable = quotient_variable or scope.fresh("outer")
                lines.append(f"{quotient_variable} = {quotient}")
                remainder = quotient_variable
        if dim == outermost:
            lines.append(f"{target} = {remainder}")
            break
        if target is not None:
            lines.append(f"{target} = {remainder} % {size_names[dim]}")
        if dim == outermost_needed:
            break
        divisors.append(size_names[dim])
    return lines, {dim: index_names[dim] for dim in indexed_dims}, dict(sorted(size_names.items()))


def elementwise_lines(
    graph: OpGraph,
    members: Sequence[str],
    variables: dict[str, str],
    scope: NameScope,
    helpers: DeviceHelpers,
    *,
    read_elsewhere: Collection[str] = (),
) -> list[str]:
    """Statements computing `members` (fusible elementwise ops, in graph order) in float32.

    variables: graph value -> kernel variable, for every value the members read; filled in for the
    members. A member read by a later member, or listed in `read_elsewhere` (read by other ops of
    the kernel), is rounded to its dtype first, as PyTorch does.
    """
    nodes = {node.name: node for node in graph.nodes}
    # an embedding lookup or a reshape is not computed: its value is read where the kernel needs it (DomainReads)
    members = [member for member in members if nodes[member].op not in GATHER_OPS + RESHAPE_OPS]
    for member in members:
        variables[member] = scope.fresh(member)
    member_set = set(members)
    read_inside = {ref for member in members for ref in nodes[member].input_refs() if ref in member_set}
    lines: list[str] = []
    rounding_explained = False
    for member in members:
        node = nodes[member]
        arguments = {name: _kernel_operand(graph, value, variables) for name, value in bind_arguments(node).items()}
        shown = ", ".join(
            [_show_argument(value, variables) for value in node.args]
            + [f"{key}={_show_argument(value, variables)}" for key, value in node.kwargs.items()]
        )
        lines.append(f"# {member} = {node.op}({shown})")
        rendering = OpRendering(variables[member], arguments, scope, helpers)
        lines.extend(FUSIBLE_OPS[node.op].render(rendering))
        dtype = node.spec.dtype
        if dtype not in ("float32", "bool") and (member in read_inside or member in read_elsewhere):
            variable = variables[member]
            if not rounding_explained:
                lines.append(f"# round to the op's dtype ({dtype}) before the next op reads it, as PyTorch does")
                rounding_explained = True
            if dtype == "bfloat16":  # with integer ops: Triton's CPU interpreter truncates casts to bfloat16
                lines.append(f"{variable} = {helpers.name_of('round_to_bfloat16')}({variable})")
            else:
                lines.append(f"{variable} = {variable}.to({TRITON_DTYPES[dtype]}).to(tl.float32)")
    return lines


def stored(variable: str, dtype: str) -> str:
    """The expression to store a float32 kernel variable into a tensor of `dtype`."""
    return variable if dtype in ("float32", "bool") else f"{variable}.to({TRITON_DTYPES[dtype]})"


def _kernel_operand(graph: OpGraph, value: Any, variables: dict[str, str]) -> Any:
    if isinstance(value, dict) and "ref" in value:
        ref = value["ref"]
        dtype = graph.spec_of(ref).dtype
        return TensorOperand(variables[ref], dtype == "bool", dtype)
    return value


def _show_argument(value: Any, variables: dict[str, str]) -> str:
    if isinstance(value, dict) and "ref" in value:
        return variables[value["ref"]]
    if isinstance(value, dict) and "dtype" in value:
        return f"torch.{value['dtype']}"
    return repr(value)


def domain_text(domain: tuple[Dim, ...]) -> str:
    return "[" + ", ".join(str(dim) for dim in domain) + "]"


class PointwiseTemplate(Template):
    """Elementwise ops sharing one output shape, in one launch over the flattened domain."""

    name = "pointwise"
    read_member_ops = GATHER_OPS + RESHAPE_OPS
    summary = "elementwise math, activations, comparisons, where, clamp, casts, eval-mode dropout"
    parameters = (
        power_of_two("block", 64, 8192, "elements each program computes"),
        power_of_two("warps", 1, 16, "warps per program"),
    )

    def default_parameters(self, plan: KernelPlan, graph: OpGraph) -> dict[str, Any]:
        return {"block": 1024, "warps": 4}

    def render(self, plan: KernelPlan, context: RenderContext) -> str:
        graph, domain = context.graph, plan.domain
        scope = context.scope()
        # the body below spells these names literally; taking them first renames any value called so
        for fixed in ("pid", "offsets", "flat", "mask", "numel", "BLOCK", "CHANNELS_LAST", "INT32_INDICES", *TILED_NAMES):
            scope.fresh(fixed)
        variables: dict[str, str] = {}
        nodes = {node.name: node for node in graph.nodes}
        reads = DomainReads(
            graph, domain, reads_of(nodes, plan.nodes), scope, variables, flat_fast_path=True,
            gathered=read_members(nodes, plan.nodes),
        )
        compute = elementwise_lines(graph, plan.nodes, variables, scope, context.helpers)
        output_pointers = {value: scope.fresh(f"{variables[value]}_ptr") for value in plan.outputs}
        follows_layout = follows_channels_last(domain, reads)
        names: tuple[dict[int, str], dict[int, str]] = ({}, {})

        def index_block(dims: list[int], combine_divisions: bool) -> list[str]:
            """Statements splitting `flat` into the indices of `dims` (in the layout CHANNELS_LAST picks), widened to
            int64 to meet the strides."""
            row_major, _, _ = flat_index_lines(
                domain, dims, "flat", scope, names=names, combine_divisions=combine_divisions
            )
            widened = [f"{names[0][dim]} = {names[0][dim]}.to(tl.int64)" for dim in dims]
            if not follows_layout or not dims:
                return row_major + widened
            channels_last, _, _ = flat_index_lines(
                domain, dims, "flat", scope, memory_order=CHANNELS_LAST_ORDER, names=names,
                combine_divisions=combine_divisions,
            )  # fmt: skip
            return (
                ["# the offsets run over memory: (n, c, h, w) order, or (n, h, w, c) for channels-last tensors"]
                + ["if CHANNELS_LAST:"] + [INDENT + line for line in channels_last]
                + ["else:"] + [INDENT + line for line in row_major]
                + widened
            )

        # every index, split with one division per dim: right for any size and layout
        wide_lines = index_block(reads.indexed_dims, combine_divisions=False)
        # where the offsets fit int32 and every full-shape read is contiguous (read at the flat offsets), only the
        # broadcast reads need indices, and neighbouring dims none of them varies along go in one division
        flagged = [read.contiguous_flag for read in reads.reads if read.contiguous_flag]
        broadcast_dims = sorted({dim for read in reads.reads if not read.contiguous_flag for dim in read.strides})
        narrow_lines = index_block(broadcast_dims, combine_divisions=True)
        index_names = {dim: names[0][dim] for dim in reads.indexed_dims}
        size_names = dict(sorted(names[1].items()))

        body = [
            "pid = tl.program_id(0)",
            "# int64 offsets: the flattened domain may hold more than 2**31 elements",
            "offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
            "# mask guards the last block",
            "mask = offsets < numel",
        ]
        if wide_lines:
            body += [
                "# split each flat offset into per-dimension indices, for inputs read through strides: in int32 where",
                "# the offsets fit (a 64-bit division costs several 32-bit ones)",
                "if INT32_INDICES:",
                f"{INDENT}flat = offsets.to(tl.int32)",
                "else:",
                f"{INDENT}flat = offsets",
            ]
            if narrow_lines == wide_lines:
                body += wide_lines
            else:
                narrow_case = " and ".join(["INT32_INDICES", *flagged])
                body += (
                    [f"if {narrow_case}:"]
                    + [INDENT + line for line in narrow_lines or ["pass  # every read is at the flat offsets"]]
                    + ["else:"]
                    + [INDENT + line for line in wide_lines]
                )
        body.extend(reads.load_lines(index_names, "mask", flat_offsets="offsets"))
        body.extend(compute)
        for value in plan.outputs:
            dtype = graph.spec_of(value).dtype
            body.append(f"tl.store({output_pointers[value]} + offsets, {stored(variables[value], dtype)}, mask=mask)")

        parameters = (
            reads.pointer_parameters()
            + list(output_pointers.values())
            + ["numel"]
            + list(size_names.values())
            + reads.stride_parameters()
            + reads.flag_parameters()
            + (["CHANNELS_LAST: tl.constexpr"] if follows_layout else [])
            + (["INT32_INDICES: tl.constexpr"] if wide_lines else [])
            + ["BLOCK: tl.constexpr"]
        )
        replaced = ", ".join(f"{op} ({node})" for node, op in zip(plan.nodes, plan.ops))
        lines = ["@triton.jit", f"def {plan.kernel}("]
        lines += [f"{INDENT}{parameter}," for parameter in parameters]
        lines += [
            "):",
            f'{INDENT}"""Replaces {replaced}.',
            "",
            f"{INDENT}Each program computes BLOCK elements of the flattened {domain_text(domain)} domain in float32.",
            f'{INDENT}"""',
        ]
        lines += [f"{INDENT}{line}" for line in body]
        kernel_source = "\n".join(lines) + "\n"
        tiled = _tiled_kernel(plan, graph, reads, compute, output_pointers, variables, scope) if follows_layout else None
        wrapper = self._wrapper(plan, context, reads, list(size_names), follows_layout, bool(wide_lines), tiled)
        return kernel_source + "\n\n" + (tiled.source + "\n\n" if tiled else "") + wrapper

    def _wrapper(
        self,
        plan: KernelPlan,
        context: RenderContext,
        reads: DomainReads,
        size_dims: list[int],
        follows_layout: bool,
        splits_offsets: bool,
        tiled: "TiledKernel | None" = None,
    ) -> str:
        graph = context.graph
        scope = context.scope()
        tensors = {value: scope.fresh(value) for value in plan.inputs}
        outputs = {value: scope.fresh(value) for value in plan.outputs}
        domain_shape, numel, block, grid, layout = (
            scope.fresh(name) for name in ("domain_shape", "numel", "BLOCK", "grid", "layout")
        )
        full_shape = [read for read in reads.reads if read.spec.shape == plan.domain]
        stored_full_shape = [read for read in full_shape if read.lookup is None and read.reshaped is None]
        device = f"{tensors[plan.inputs[0]]}.device"

        returned = ", ".join(outputs.values())
        lines = [
            f"def {plan.wrapper}({', '.join(tensors.values())}):",
            f'{INDENT}"""Computes {", ".join(plan.nodes)} in one launch of {plan.kernel}; returns {returned}."""',
        ]
        lines += [INDENT + line for line in reads.setup_lines(tensors, scope, context.helpers)]
        if full_shape:
            lines.append(f"{INDENT}{domain_shape} = {reads.shape_of(full_shape[0], tensors)}")
        else:
            shapes = ", ".join(reads.shape_of(read, tensors) for read in reads.reads)
            lines.append(f"{INDENT}{domain_shape} = torch.broadcast_shapes({shapes})")
        memory_format = ""
        if follows_layout:
            first = tensors[_layout_source(graph, plan, [read.value for read in stored_full_shape])]
            lines += [
                f"{INDENT}# the output takes the layout (channels-last or not) eager's ops would pass down to it, each",
                f"{INDENT}# from its first full-size operand, and the offsets run over memory in that layout",
                f"{INDENT}{layout} = (",
                f"{INDENT * 2}torch.channels_last",
                f"{INDENT * 2}if not {first}.is_contiguous() and {first}.is_contiguous(memory_format=torch.channels_last)",
                f"{INDENT * 2}else torch.contiguous_format",
                f"{INDENT})",
            ]
            memory_format = f", memory_format={layout}"
        for value, variable in outputs.items():
            dtype = graph.spec_of(value).dtype
            lines.append(
                f"{INDENT}{variable} = torch.empty({domain_shape}, dtype=torch.{dtype}, device={device}{memory_format})"
            )
        lines.append(f"{INDENT}{numel} = {next(iter(outputs.values()))}.numel()")
        stride_lines, stride_arguments, flag_arguments = reads.wrapper_arguments(
            tensors, scope, memory_format=layout if follows_layout else None
        )
        lines += [INDENT + line for line in stride_lines]
        if tiled is not None:
            lines += [INDENT + line for line in tiled.launch_lines(
                reads, tensors, outputs, domain_shape, layout, stride_arguments, plan.params["warps"], scope
            )]
        lines += [
            f"{INDENT}{block} = {plan.params['block']}",
            f"{INDENT}# one program per block of {block} elements",
            f"{INDENT}{grid} = (triton.cdiv({numel}, {block}),)",
            f"{INDENT}{plan.kernel}[{grid}](",
        ]
        arguments = (
            reads.pointer_arguments(tensors)
            + list(outputs.values())
            + [numel]
            + [f"{domain_shape}[{dim}]" for dim in size_dims]
            + stride_arguments
            + flag_arguments
            + ([f"CHANNELS_LAST={layout} is torch.channels_last"] if follows_layout else [])
            + ([f"INT32_INDICES={numel} + {block} <= 2**31"] if splits_offsets else [])
            + [f"BLOCK={block}", f"num_warps={plan.params['warps']}"]
        )
        lines += [f"{INDENT * 2}{argument}," for argument in arguments]
        lines += [f"{INDENT})", f"{INDENT}return {returned}"]
        return "\n".join(lines) + "\n"


# the names the tiled kernel spells literally (reserved in every pointwise kernel's scope)
TILED_NAMES = (
    "pixel_block", "channel_block", "sample", "sample_wide", "pixels", "channels", "channels_wide", "pixel_count",
    "row_major_offsets", "channels_last_offsets", "height_index", "width_index", "BLOCK_P", "BLOCK_C",
)
# pixels x channels a tiled program computes: 64 x 64, as the channels-last conversion moves them
TILE_PIXELS = 64
TILE_CHANNELS = 64
# the grid's third dim (one program row per sample) holds at most this many
MAX_GRID_SAMPLES = 65535


@dataclass(frozen=True)
class TiledKernel:
    """The second kernel of a 4-d pointwise kernel that reads full-size inputs in both layouts (an NCHW tensor and a
    channels-last one, or a permuted [N, H, W, C] result read as [N, C, H, W]): one program per tile of pixels by
    channels of one sample, each full-size input read in its own memory order and the output written in its own, so
    every load and store runs along memory (the flat kernel would read one of them a channel stride apart)."""

    source: str
    name: str
    order_flags: dict[str, str]  # full-size input value -> its ORDER constexpr (1 row-major, 2 channels-last, 0 other)

    def launch_lines(
        self,
        reads: DomainReads,
        tensors: dict[str, str],
        outputs: dict[str, str],
        domain_shape: str,
        layout: str,
        stride_arguments: list[str],
        warps: int,
        scope: NameScope,
    ) -> list[str]:
        """The wrapper's statements that launch it and return, when some full-size input lies in the other layout."""
        other = scope.fresh("other_layout")
        full = [tensors[value] for value in self.order_flags]
        mixed = " or ".join(
            f"(not {tensor}.is_contiguous(memory_format={layout}) and {tensor}.is_contiguous(memory_format={other}))"
            for tensor in full
        )
        orders = [
            f"{flag}=1 if {tensors[value]}.is_contiguous() else 2 if "
            f"{tensors[value]}.is_contiguous(memory_format=torch.channels_last) else 0"
            for value, flag in self.order_flags.items()
        ]
        arguments = (
            reads.pointer_arguments(tensors)
            + list(outputs.values())
            + [f"{domain_shape}[{dim}]" for dim in range(4)]
            + stride_arguments
            + orders
            + [f"CHANNELS_LAST={layout} is torch.channels_last", f"BLOCK_P={TILE_PIXELS}", f"BLOCK_C={TILE_CHANNELS}"]
            + [f"num_warps={warps}"]
        )
        grid = (
            f"(triton.cdiv({domain_shape}[2] * {domain_shape}[3], {TILE_PIXELS}), "
            f"triton.cdiv({domain_shape}[1], {TILE_CHANNELS}), {domain_shape}[0])"
        )
        return (
            [
                f"{other} = torch.contiguous_format if {layout} is torch.channels_last else torch.channels_last",
                "# a full-size input in the other layout: tiles of pixels by channels read each input along its memory",
                f"if ({mixed}) and {domain_shape}[0] <= {MAX_GRID_SAMPLES}:",
                f"{INDENT}{self.name}[{grid}](",
            ]
            + [f"{INDENT * 2}{argument}," for argument in arguments]
            + [f"{INDENT})", f"{INDENT}return {', '.join(outputs.values())}"]
        )


def _tiled_kernel(
    plan: KernelPlan,
    graph: OpGraph,
    reads: DomainReads,
    compute: list[str],
    output_pointers: dict[str, str],
    variables: dict[str, str],
    scope: NameScope,
) -> TiledKernel | None:
    """The tiled kernel of a 4-d kernel over a layout-following domain with two or more full-size inputs (only they can
    disagree in layout), each read as stored (no embedding lookups or reshapes); None for any other kernel."""
    full = [read for read in reads.reads if read.contiguous_flag]
    if len(full) < 2 or any(read.lookup is not None or read.reshaped is not None for read in reads.reads):
        return None
    sizes = [scope.fresh(f"size{dim}") for dim in range(4)]
    order_flags = {read.value: scope.fresh(f"{read.variable}_order".upper()) for read in full}
    name = scope.fresh(f"{plan.kernel}_tiled")
    index_of_dim = {0: "sample_wide", 1: "channels_wide", 2: "height_index", 3: "width_index"}
    body = [
        "pixel_block = tl.program_id(0)",
        "channel_block = tl.program_id(1)",
        "sample = tl.program_id(2).to(tl.int64)",
        f"pixel_count = {sizes[2]} * {sizes[3]}",
        "pixels = pixel_block * BLOCK_P + tl.arange(0, BLOCK_P)",
        "channels = channel_block * BLOCK_C + tl.arange(0, BLOCK_C)",
        f"mask = (pixels < pixel_count)[:, None] & (channels < {sizes[1]})[None, :]",
        "# each element's offset in a row-major (n, c, h, w) and a channels-last (n, h, w, c) tensor of the domain",
        "channels_wide = channels.to(tl.int64)[None, :]",
        f"row_major_offsets = (sample * {sizes[1]} + channels_wide) * pixel_count + pixels.to(tl.int64)[:, None]",
        f"channels_last_offsets = (sample * pixel_count + pixels.to(tl.int64)[:, None]) * {sizes[1]} + channels_wide",
        "# inputs read through strides (broadcast or strided) take each element's indices, as blocks (a load whose",
        "# pointer varies along none of the tile's dims still takes the tile's mask)",
        "sample_wide = tl.full((1, 1), 0, tl.int64) + sample",
        f"height_index = (pixels // {sizes[3]}).to(tl.int64)[:, None]",
        f"width_index = (pixels % {sizes[3]}).to(tl.int64)[:, None]",
    ]
    others = [read.value for read in reads.reads if not read.contiguous_flag]
    body += reads.load_lines(index_of_dim, "mask", values=others)
    for read in full:
        convert, strided = _float_conversion(read.spec.dtype), _strided_offsets(read, index_of_dim)
        flag, load = order_flags[read.value], f"{read.variable} = tl.load({read.pointer} + "
        body += [
            f"if {flag} == 1:",
            f"{INDENT}{load}row_major_offsets, mask=mask){convert}",
            f"elif {flag} == 2:",
            f"{INDENT}{load}channels_last_offsets, mask=mask){convert}",
            "else:",
            f"{INDENT}{load}{strided}, mask=mask){convert}",
        ]
    body += compute
    body.append("offsets = channels_last_offsets if CHANNELS_LAST else row_major_offsets")
    for value in plan.outputs:
        body.append(
            f"tl.store({output_pointers[value]} + offsets, {stored(variables[value], graph.spec_of(value).dtype)}, mask=mask)"
        )
    parameters = (
        reads.pointer_parameters()
        + list(output_pointers.values())
        + sizes
        + reads.stride_parameters()
        + [f"{flag}: tl.constexpr" for flag in order_flags.values()]
        + ["CHANNELS_LAST: tl.constexpr", "BLOCK_P: tl.constexpr", "BLOCK_C: tl.constexpr"]
    )
    lines = ["@triton.jit", f"def {name}("] + [f"{INDENT}{parameter}," for parameter in parameters]
    lines += [
        "):",
        f'{INDENT}"""{plan.kernel} for inputs in both layouts: each program computes a BLOCK_P x BLOCK_C tile of one',
        f"{INDENT}sample's pixels by channels of the {domain_text(plan.domain)} domain, reading each full-size input",
        f'{INDENT}along its own memory order (ORDER: 1 row-major, 2 channels-last, 0 through strides)."""',
    ]
    lines += [f"{INDENT}{line}" for line in body]
    return TiledKernel("\n".join(lines) + "\n", name, order_flags)


def _layout_source(graph: OpGraph, plan: KernelPlan, stored_inputs: list[str]) -> str:
    """The full-size input whose layout eager PyTorch would give the kernel's first output: each elementwise op's
    result takes the layout of its first full-size operand, so the chain is walked back from the output along first
    full-size operands to an input. The first of `stored_inputs` (full-size inputs read as stored) where the walk
    ends elsewhere (an embedding lookup or a reshape read)."""
    nodes = {node.name: node for node in graph.nodes}
    members = set(plan.nodes)
    value = plan.outputs[0]
    while value in members:
        full_size = [ref for ref in nodes[value].input_refs() if graph.spec_of(ref).shape == plan.domain]
        if not full_size:
            break
        value = full_size[0]
    return value if value in stored_inputs else stored_inputs[0]


# a 4-d tensor's dims outermost first in channels-last memory: (batch, height, width, channels)
CHANNELS_LAST_ORDER = (0, 2, 3, 1)


def follows_channels_last(domain: tuple[Dim, ...], reads: DomainReads) -> bool:
    """Whether a kernel over `domain` runs in channels-last memory order when its first full-size input is so laid
    out: a 4-d domain whose channels and pixels both vary, read from a full-size input."""
    return (
        len(domain) == 4
        and domain[1] != 1
        and any(size != 1 for size in domain[2:])
        and any(read.spec.shape == domain and read.lookup is None and read.reshaped is None for read in reads.reads)
    )
