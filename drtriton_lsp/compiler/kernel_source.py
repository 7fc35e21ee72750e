"""Source text of one fused elementwise kernel and its launch wrapper, in Triton-tutorial form.

The kernel walks the flattened domain in blocks; the wrapper allocates outputs and computes the grid.
Sizes and strides come from the tensors at run time, so one kernel serves every allowed shape.
"""

from __future__ import annotations

from dataclasses import dataclass

from drtriton_lsp.compiler.elementwise import (
    ELEMENTWISE_OPS,
    TRITON_DTYPES,
    DeviceHelpers,
    OpRendering,
    TensorOperand,
    bind_arguments,
)
from drtriton_lsp.compiler.graph import OpGraph, OpNode, TensorSpec
from drtriton_lsp.compiler.names import NameScope
from drtriton_lsp.compiler.schedule import FusedKernel

INDENT = "    "


@dataclass(frozen=True)
class _KernelInput:
    """How the kernel reads one graph value: pointer, per-dimension strides, optional fast path."""

    value: str
    spec: TensorSpec
    variable: str
    pointer: str
    strides: dict[int, str]  # domain dim -> stride parameter, for dims the value varies along
    contiguous_flag: str | None  # set when the value may be a contiguous tensor of the domain's shape


def render_fused_kernel(
    graph: OpGraph, kernel: FusedKernel, helpers: DeviceHelpers, module_names: tuple[str, ...]
) -> str:
    """The `@triton.jit` kernel followed by its wrapper, for one fused group."""
    nodes = {node.name: node for node in graph.nodes}
    scope = NameScope(module_names)
    # the body below spells these names literally; taking them first renames any value called so
    for fixed in ("pid", "offsets", "mask", "numel", "BLOCK"):
        scope.fresh(fixed)
    domain = kernel.domain
    varying_dims = [dim for dim, size in enumerate(domain) if size != 1]

    variables: dict[str, str] = {}
    inputs: list[_KernelInput] = []
    for value in kernel.inputs:
        spec = graph.spec_of(value)
        variables[value] = scope.fresh(value)
        pointer = scope.fresh(f"{variables[value]}_ptr")
        offset = len(domain) - spec.rank
        dims = [dim for dim in varying_dims if dim >= offset and spec.shape[dim - offset] != 1]
        strides = {dim: scope.fresh(f"{variables[value]}_stride{dim}") for dim in dims}
        flag = scope.fresh(f"{variables[value]}_is_contiguous".upper()) if dims and spec.shape == domain else None
        inputs.append(_KernelInput(value, spec, variables[value], pointer, strides, flag))
    for member in kernel.nodes:
        variables[member] = scope.fresh(member)
    output_pointers = {value: scope.fresh(f"{variables[value]}_ptr") for value in kernel.outputs}

    indexed_dims = sorted({dim for kernel_input in inputs for dim in kernel_input.strides})
    index_names = {dim: scope.fresh(f"index{dim}") for dim in indexed_dims}
    size_names: dict[int, str] = {}
    index_lines = _index_lines(varying_dims, indexed_dims, index_names, size_names, scope)
    size_dims = sorted(size_names)

    body: list[str] = [
        "pid = tl.program_id(0)",
        "# int64 offsets: the flattened domain may hold more than 2**31 elements",
        "offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)",
        "# mask guards the last block",
        "mask = offsets < numel",
    ]
    if index_lines:
        body.append("# split each flat offset into per-dimension indices, for inputs read through strides")
        body.extend(index_lines)
    if any(kernel_input.contiguous_flag for kernel_input in inputs):
        body.append("# a contiguous input of the domain's shape is read straight at the flat offsets")
    for kernel_input in inputs:
        body.extend(_load_lines(kernel_input, index_names, len(domain)))
    body.extend(_compute_lines(graph, nodes, kernel, variables, scope, helpers))
    for value in kernel.outputs:
        stored = variables[value]
        dtype = graph.spec_of(value).dtype
        if dtype != "float32":
            stored = f"{stored}.to({TRITON_DTYPES[dtype]})"
        body.append(f"tl.store({output_pointers[value]} + offsets, {stored}, mask=mask)")

    parameters = (
        [kernel_input.pointer for kernel_input in inputs]
        + [output_pointers[value] for value in kernel.outputs]
        + ["numel"]
        + [size_names[dim] for dim in size_dims]
        + [stride for kernel_input in inputs for stride in kernel_input.strides.values()]
        + [f"{kernel_input.contiguous_flag}: tl.constexpr" for kernel_input in inputs if kernel_input.contiguous_flag]
        + ["BLOCK: tl.constexpr"]
    )
    replaced = ", ".join(f"{op} ({node})" for node, op in zip(kernel.nodes, kernel.ops))
    lines = ["@triton.jit", f"def {kernel.kernel}("]
    lines += [f"{INDENT}{parameter}," for parameter in parameters]
    lines += [
        "):",
        f'{INDENT}"""Replaces {replaced}.',
        "",
        f"{INDENT}Each program computes BLOCK elements of the flattened {_domain_text(domain)} domain in float32.",
        f'{INDENT}"""',
    ]
    lines += [f"{INDENT}{line}" for line in body]
    kernel_source = "\n".join(lines) + "\n"
    return kernel_source + "\n\n" + _wrapper_source(graph, kernel, inputs, size_dims, module_names)


def _domain_text(domain: tuple) -> str:
    return "[" + ", ".join(str(dim) for dim in domain) + "]"


def _index_lines(
    varying_dims: list[int],
    indexed_dims: list[int],
    index_names: dict[int, str],
    size_names: dict[int, str],
    scope: NameScope,
) -> list[str]:
    """Statements that split `offsets` into the indices of `indexed_dims` (row-major domain).

    Size-1 dims are skipped (their index is always 0). Fills `size_names` with the size
    parameters the statements use.
    """
    if not indexed_dims:
        return []
    lowest_needed = indexed_dims[0]
    outermost = varying_dims[0]
    splitting = [dim for dim in reversed(varying_dims) if dim >= lowest_needed]
    lines: list[str] = []
    remainder = "offsets"
    quotient_variable: str | None = None
    for position, dim in enumerate(splitting):
        target = index_names.get(dim)
        if dim == outermost:
            lines.append(f"{target} = {remainder}")
            break
        size = size_names[dim] = scope.fresh(f"size{dim}")
        if target is not None:
            lines.append(f"{target} = {remainder} % {size}")
        if dim == lowest_needed:
            break
        quotient = f"{remainder} // {size}"
        if splitting[position + 1] == outermost:
            remainder = quotient
        else:
            quotient_variable = quotient_variable or scope.fresh("outer")
            lines.append(f"{quotient_variable} = {quotient}")
            remainder = quotient_variable
    return lines


def _load_lines(kernel_input: _KernelInput, index_names: dict[int, str], domain_rank: int) -> list[str]:
    dtype = kernel_input.spec.dtype
    # compute in float32; bool tensors stay int1 so they can serve as conditions
    convert = "" if dtype in ("float32", "bool") else ".to(tl.float32)"
    variable, pointer = kernel_input.variable, kernel_input.pointer
    if not kernel_input.strides:
        return [
            f"# {variable} holds one element, the same for the whole domain",
            f"{variable} = tl.load({pointer}){convert}",
        ]
    strided = " + ".join(f"{index_names[dim]} * {stride}" for dim, stride in kernel_input.strides.items())
    strided_load = f"{variable} = tl.load({pointer} + {strided}, mask=mask){convert}"
    if kernel_input.contiguous_flag is None:
        dims = ", ".join(str(dim) for dim in kernel_input.strides)
        plural = "s" if len(kernel_input.strides) > 1 else ""
        return [
            f"# {variable} broadcasts: of the domain's {domain_rank} dims it varies along dim{plural} {dims} only",
            strided_load,
        ]
    return [
        f"if {kernel_input.contiguous_flag}:",
        f"{INDENT}{variable} = tl.load({pointer} + offsets, mask=mask){convert}",
        "else:",
        f"{INDENT}{strided_load}",
    ]


def _compute_lines(
    graph: OpGraph,
    nodes: dict[str, OpNode],
    kernel: FusedKernel,
    variables: dict[str, str],
    scope: NameScope,
    helpers: DeviceHelpers,
) -> list[str]:
    members = set(kernel.nodes)
    read_inside = {ref for member in kernel.nodes for ref in nodes[member].input_refs() if ref in members}
    lines: list[str] = []
    rounding_explained = False
    for member in kernel.nodes:
        node = nodes[member]
        arguments = {
            name: _kernel_operand(graph, value, variables) for name, value in bind_arguments(node).items()
        }
        shown = ", ".join(
            [_show_argument(value, variables) for value in node.args]
            + [f"{key}={_show_argument(value, variables)}" for key, value in node.kwargs.items()]
        )
        lines.append(f"# {member} = {node.op}({shown})")
        rendering = OpRendering(variables[member], arguments, scope, helpers)
        lines.extend(ELEMENTWISE_OPS[node.op].render(rendering))
        dtype = node.spec.dtype
        if dtype != "float32" and member in read_inside:
            variable = variables[member]
            if not rounding_explained:
                lines.append(f"# round to the op's dtype ({dtype}) before the next op reads it, as PyTorch does")
                rounding_explained = True
            lines.append(f"{variable} = {variable}.to({TRITON_DTYPES[dtype]}).to(tl.float32)")
    return lines


def _kernel_operand(graph: OpGraph, value, variables: dict[str, str]):
    if isinstance(value, dict) and "ref" in value:
        ref = value["ref"]
        return TensorOperand(variables[ref], graph.spec_of(ref).dtype == "bool")
    return value


def _show_argument(value, variables: dict[str, str]) -> str:
    if isinstance(value, dict) and "ref" in value:
        return variables[value["ref"]]
    if isinstance(value, dict) and "dtype" in value:
        return f"torch.{value['dtype']}"
    return repr(value)


def _wrapper_source(
    graph: OpGraph,
    kernel: FusedKernel,
    inputs: list[_KernelInput],
    size_dims: list[int],
    module_names: tuple[str, ...],
) -> str:
    scope = NameScope(module_names)
    parameters = {kernel_input.value: scope.fresh(kernel_input.value) for kernel_input in inputs}
    outputs = {value: scope.fresh(value) for value in kernel.outputs}
    domain_shape, numel, block, grid = (scope.fresh(name) for name in ("domain_shape", "numel", "BLOCK", "grid"))
    full_shape = [kernel_input for kernel_input in inputs if kernel_input.spec.shape == kernel.domain]
    device = f"{parameters[inputs[0].value]}.device"

    returned = ", ".join(outputs.values())
    summary = ", ".join(kernel.nodes)
    lines = [
        f"def {kernel.wrapper}({', '.join(parameters.values())}):",
        f'{INDENT}"""Computes {summary} in one launch of {kernel.kernel}; returns {returned}."""',
    ]
    if full_shape:
        lines.append(f"{INDENT}{domain_shape} = {parameters[full_shape[0].value]}.shape")
    else:
        shapes = ", ".join(f"{parameters[kernel_input.value]}.shape" for kernel_input in inputs)
        lines.append(f"{INDENT}{domain_shape} = torch.broadcast_shapes({shapes})")
    for value, variable in outputs.items():
        dtype = graph.spec_of(value).dtype
        lines.append(f"{INDENT}{variable} = torch.empty({domain_shape}, dtype=torch.{dtype}, device={device})")
    lines.append(f"{INDENT}{numel} = {next(iter(outputs.values()))}.numel()")

    stride_arguments: list[str] = []
    for kernel_input in inputs:
        if not kernel_input.strides:
            continue
        tensor = parameters[kernel_input.value]
        strides = scope.fresh(f"{tensor}_strides")
        # broadcast dims get stride 0, so one formula reads full-size and broadcast inputs alike
        full_size = kernel_input.spec.shape == kernel.domain
        source = f"{tensor}.stride()" if full_size else f"{tensor}.expand({domain_shape}).stride()"
        lines.append(f"{INDENT}{strides} = {source}")
        stride_arguments += [f"{strides}[{dim}]" for dim in kernel_input.strides]

    lines += [
        f"{INDENT}{block} = {kernel.block}",
        f"{INDENT}# one program per block of {block} elements",
        f"{INDENT}{grid} = (triton.cdiv({numel}, {block}),)",
        f"{INDENT}{kernel.kernel}[{grid}](",
    ]
    arguments = (
        [parameters[kernel_input.value] for kernel_input in inputs]
        + list(outputs.values())
        + [numel]
        + [f"{domain_shape}[{dim}]" for dim in size_dims]
        + stride_arguments
        + [
            f"{kernel_input.contiguous_flag}={parameters[kernel_input.value]}.is_contiguous()"
            for kernel_input in inputs
            if kernel_input.contiguous_flag
        ]
        + [f"BLOCK={block}", f"num_warps={kernel.num_warps}"]
    )
    lines += [f"{INDENT * 2}{argument}," for argument in arguments]
    lines += [f"{INDENT})", f"{INDENT}return {returned}"]
    return "\n".join(lines) + "\n"
