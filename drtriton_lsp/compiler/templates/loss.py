"""The loss template: elementwise losses, cross entropy / NLL over classes, row-wise distances, and their reductions.

A reduction to a scalar is deterministic: one program adds everything, or a second kernel adds per-program sums in order.
"""

from __future__ import annotations

from typing import Any, Sequence

from drtriton_lsp.compiler.elementwise import float_literal
from drtriton_lsp.compiler.errors import ScheduleError
from drtriton_lsp.compiler.gather import read_members, reads_of
from drtriton_lsp.compiler.graph import OpGraph, OpNode
from drtriton_lsp.compiler.losses import (
    ELEMENT_FORMULAS,
    ELEMENT_NAMES,
    NOT_A_NUMBER,
    REDUCTIONS,
    clamp_min_zero,
    loss_of,
    rounding_to,
)
from drtriton_lsp.compiler.reshape_reads import RESHAPE_OPS
from drtriton_lsp.compiler.templates.base import (
    AnchorShape,
    KernelPlan,
    RenderContext,
    Template,
    choice,
    example_extent,
    next_power_of_two,
    power_of_two,
)
from drtriton_lsp.compiler.templates.pointwise import (
    INDENT,
    DomainReads,
    domain_text,
    elementwise_lines,
    flat_index_lines,
    stored,
)
from drtriton_lsp.compiler.templates.writer import H200_STREAMING_MULTIPROCESSORS

NEGATIVE_INFINITY = 'float("-inf")'
# partial sums the finishing kernel adds per step: there are few, and one program adds them all
FINISH_BLOCK = 1024
# elements one program keeps in registers at a time, by default
TILE_ELEMENTS = 4096
# at most this many input elements are read by one program by default; more go to per-program partial sums
SINGLE_PROGRAM_LIMIT = 65536

STRATEGY_DOC = (
    "how a 'mean' or 'sum' reduction adds up (unused for reduction='none'): single: one program loops over "
    "everything; partials: one program per block writes a partial sum, a second kernel adds them in order"
)
KERNEL_NAMES = (
    "pid", "offsets", "rows", "mask", "positions", "start", "totals", "weight_totals", "total", "weight_total",
    "element", "element_weight", "columns", "tile_mask", "reduced_size", "class_count", "running_max",
    "running_total", "picked", "chunk_max", "new_max", "shift", "log_probability", "counted", "in_range",
    "target_weight", "partials_ptr", "weight_partials_ptr", "partial_count", "logits", "norm1", "norm2",
    "positive_distance", "negative_distance", "BLOCK", "COLUMNS",
)



class LossTemplate(Template):
    """Loss functions: a loss per element (or per row), then PyTorch's reduction, in one or two launches."""

    name = "loss"
    summary = (
        "mse, l1, smooth_l1, huber, soft_margin, binary_cross_entropy(_with_logits), kl_div, margin_ranking, "
        "hinge_embedding, cross_entropy, nll_loss, cosine_similarity, pairwise_distance, triplet_margin_loss"
    )
    parameters = (
        choice("reduction", ("single", "partials"), STRATEGY_DOC),
        power_of_two("block", 1, 8192, "elements (elementwise losses) or rows (losses over classes or rows) per program"),
        power_of_two("columns", 1, 8192, "classes or row elements per loop step (unused by elementwise losses)"),
        power_of_two("warps", 1, 16, "warps per program"),
    )

    read_member_ops = RESHAPE_OPS

    def reads_in_place(self, member: OpNode, members: Sequence[str], graph: OpGraph) -> bool:
        """A reshape read among the loss's per-element values, not as a class loss's target or class weights (read
        per row, through their own strides)."""
        losses = [loss_of(node, graph) for node in graph.nodes if node.name in members]
        per_row = {
            value
            for loss in losses
            if loss is not None and loss.family == "classes"
            for role, value in loss.operands
            if role in ("target", "weight")
        }
        return super().reads_in_place(member, members, graph) and member.name not in per_row

    def anchor(self, node: OpNode, graph: OpGraph) -> AnchorShape | None:
        loss = loss_of(node, graph)
        if loss is None or (loss.family == "elementwise" and loss.reduction == 0):
            return None  # one loss per element and no reduction: a pointwise op (the elementwise table)
        return AnchorShape(loss.primary, graph.spec_of(loss.primary).shape, node.spec.shape)

    def default_parameters(self, plan: KernelPlan, graph: OpGraph) -> dict[str, Any]:
        node = next(node for node in graph.nodes if node.name == plan.anchor)
        loss = loss_of(node, graph)
        positions = example_extent(loss.positions, graph)
        folded = 1 if loss.family == "elementwise" or loss.kind == "nll" else loss.domain[loss.reduced_dim]
        # elements read: one program adds them all while that stays small, else each block writes a partial sum
        work = positions * example_extent([folded], graph)
        strategy = "single" if work <= SINGLE_PROGRAM_LIMIT else "partials"
        if loss.family == "elementwise":
            return {"reduction": strategy, "block": 1024, "columns": 1, "warps": 4}
        if loss.kind == "nll":
            # one gathered element per row: rows are the whole tile
            return {"reduction": strategy, "block": 256, "columns": 1, "warps": 4}
        width = min(1024, next_power_of_two(example_extent([folded], graph)))
        rows = max(1, TILE_ELEMENTS // width)
        # fewer rows per program where there are too few rows to keep every SM busy
        while rows > 1 and -(-positions // rows) < 2 * H200_STREAMING_MULTIPROCESSORS:
            rows //= 2
        return {"reduction": strategy, "block": rows, "columns": width, "warps": min(8, max(1, rows * width // 512))}

    def render(self, plan: KernelPlan, context: RenderContext) -> str:
        return LossKernel(plan, context).render()


class LossKernel:
    """Source of one loss kernel (two with partial sums) and its launch wrapper."""

    def __init__(self, plan: KernelPlan, context: RenderContext):
        self.plan = plan
        self.graph = context.graph
        self.context = context
        self.nodes = {node.name: node for node in self.graph.nodes}
        self.loss = loss_of(self.nodes[plan.anchor], self.graph)
        self.dtype = self.nodes[plan.anchor].spec.dtype
        self.reduces = self.loss.reduction != 0
        self.partials = self.reduces and plan.params["reduction"] == "partials"
        self.scope = context.scope()
        for fixed in KERNEL_NAMES + ELEMENT_NAMES:
            self.scope.fresh(fixed)
        # a reshape member's value is read through its source's strides, not computed
        self.read_members = read_members(self.nodes, plan.nodes)
        self.inside_values = reads_of(self.nodes, plan.prologue + (plan.anchor,))
        self.epilogue_values = [value for value in reads_of(self.nodes, plan.epilogue) if value != plan.anchor]
        for value in self.epilogue_values:
            if value in plan.prologue:
                raise ScheduleError(
                    f"kernel loss: epilogue reads {value}, which the prologue computes per element",
                    "compute that value in its own kernel",
                )
        loss = self.loss
        # values read element by element in the loss's domain (the target of a class loss is read per row)
        per_row = [value for role, value in loss.operands if role in ("target", "weight") and loss.family == "classes"]
        self.domain_values = [value for value in self.inside_values if value not in per_row]
        self.result = self.scope.fresh(plan.anchor)
        self.variables: dict[str, str] = {}
        self.reads = DomainReads(
            self.graph, loss.domain, self.domain_values, self.scope, self.variables,
            flat_fast_path=loss.family == "elementwise", gathered=self.read_members,
        )
        self.output_domain = () if self.reduces else loss.positions
        self.epilogue_variables: dict[str, str] = {plan.anchor: self.result}
        self.epilogue_reads = DomainReads(
            self.graph, self.output_domain, self.epilogue_values, self.scope, self.epilogue_variables,
            flat_fast_path=True, gathered=self.read_members,
        )
        self.position_variable = "offsets" if loss.family == "elementwise" else "rows"
        self.target = self.scope.fresh("target") if loss.family == "classes" else None
        self.target_pointer = self.scope.fresh("target_ptr") if self.target else None
        class_weight = loss.family == "classes" and loss.operand("weight") is not None
        self.weight_pointer = self.scope.fresh("weight_ptr") if class_weight else None
        self.weight_stride = self.scope.fresh("weight_stride") if self.weight_pointer else None
        self.target_strides: dict[int, str] = {}
        if self.target:
            target_shape = self.graph.spec_of(loss.operand("target")).shape
            self.target_strides = {
                dim: self.scope.fresh(f"target_stride{dim}") for dim, size in enumerate(target_shape) if size != 1
            }
        positions = loss.positions
        # position dim -> the loss domain's dim it stands for (classes and rows skip the folded dim)
        self.domain_dim_of = {
            dim: dim if loss.family == "elementwise" or dim < loss.reduced_dim else dim + 1 for dim in range(len(positions))
        }
        needed = {dim for dim, domain_dim in self.domain_dim_of.items() if domain_dim in self.reads.indexed_dims}
        needed |= set(self.target_strides)
        if not self.reduces:
            needed |= set(self.epilogue_reads.indexed_dims)
        self.index_lines, self.index, self.size_names = flat_index_lines(
            positions, sorted(needed), self.position_variable, self.scope
        )

    # --- per-position losses --------------------------------------------------------------------

    def _loss_lines(self) -> list[str]:
        """Statements giving `element` (and `element_weight` for class losses) at this block's positions."""
        lines = []
        if self.index_lines:
            lines.append("# split each position into the indices of its dims")
            lines += self.index_lines
        family = self.loss.family
        if family == "elementwise":
            lines += self._elementwise_lines()
        elif self.loss.kind == "nll":
            lines += self._nll_lines()
        elif family == "classes":
            lines += self._cross_entropy_lines()
        else:
            lines += self._row_lines()
        if self.dtype != "float32":
            lines += [
                f"# PyTorch holds the per-position losses as a {self.dtype} tensor before reducing",
                f"element = {self._rounded('element')}",
            ]
        return lines

    def _loaded(self, index_of_dim: dict[int, str], mask: str, flat_offsets: str | None = None) -> list[str]:
        """Loads of the domain values at the given indices, the prologue, and the primary input rounded."""
        lines = self.reads.load_lines(index_of_dim, mask, flat_offsets=flat_offsets)
        lines += elementwise_lines(self.graph, self.plan.prologue, self.variables, self.scope, self.context.helpers)
        primary = self.loss.primary
        dtype = self.graph.spec_of(primary).dtype
        if self.plan.prologue and dtype != "float32":
            variable = self.variables[primary]
            lines += [
                f"# the prologue's result is a {dtype} tensor in PyTorch: round it before the loss reads it",
                f"{variable} = {self._rounded(variable, dtype)}",
            ]
        return lines

    def _rounded(self, expression: str, dtype: str | None = None) -> str:
        """`expression` rounded to `dtype` (the op's by default), where PyTorch holds it as a tensor of that dtype."""
        return rounding_to(dtype or self.dtype, self.context.helpers)(expression)

    def _operands(self) -> dict[str, str]:
        return {role: self.variables[value] for role, value in self.loss.operands if value in self.variables}

    def _elementwise_lines(self) -> list[str]:
        index_of_dim = {dim: self.index[dim] for dim in self.reads.indexed_dims}
        lines = self._loaded(index_of_dim, "mask", flat_offsets="offsets")
        # the formula's locals have their own names: KERNEL_NAMES and ELEMENT_NAMES are reserved in this kernel
        return lines + ELEMENT_FORMULAS[self.loss.kind](self._operands(), self.loss, self._rounded, lambda local: local)

    def _target_lines(self) -> list[str]:
        """The class index of each row, the rows that count (not ignore_index) and valid indices."""
        if self.target_strides:
            offset = " + ".join(f"{self.index[dim]} * {stride}" for dim, stride in self.target_strides.items())
            lines = [f"{self.target} = tl.load({self.target_pointer} + {offset}, mask=mask)"]
        else:
            lines = [
                "# the target holds one class index, the same for every row",
                f"{self.target} = tl.load({self.target_pointer}) + tl.zeros([BLOCK], tl.int64)",
            ]
        ignore_index = self.loss.option("ignore_index")
        lines += [
            f"# rows whose target is ignore_index ({ignore_index}) add nothing to the loss or the weight",
            f"counted = mask & ({self.target} != {ignore_index})",
            "# PyTorch raises for any other class index out of range; NaN makes such a target visible",
            f"in_range = ({self.target} >= 0) & ({self.target} < class_count)",
        ]
        if self.weight_pointer:
            lines.append(
                f"target_weight = tl.load({self.weight_pointer} + {self.target} * {self.weight_stride}, "
                "mask=counted & in_range).to(tl.float32)"
            )
        return lines

    def _class_loss_lines(self, log_probability: str) -> list[str]:
        weighted = f"-{log_probability} * target_weight" if self.weight_pointer else f"-{log_probability}"
        return [
            f"element = tl.where(counted, tl.where(in_range, {weighted}, {NOT_A_NUMBER}), 0.0)",
            f"element_weight = tl.where(counted, {'target_weight' if self.weight_pointer else '1.0'}, 0.0)",
        ]

    def _row_indices(self, column_index: str | None, tile: bool) -> dict[int, str]:
        """Index expression per loss-domain dim: the row's index, and `column_index` along the folded dim."""
        index_of_dim = {}
        for dim, domain_dim in self.domain_dim_of.items():
            if dim in self.index:
                index_of_dim[domain_dim] = f"{self.index[dim]}[:, None]" if tile else self.index[dim]
        if column_index is not None:
            index_of_dim[self.loss.reduced_dim] = column_index
        return index_of_dim

    def _nll_lines(self) -> list[str]:
        lines = self._target_lines()
        lines.append("# each row reads its target's entry only")
        lines += self._loaded(self._row_indices(self.target, tile=False), "counted & in_range")
        return lines + self._class_loss_lines(self.variables[self.loss.primary])

    def _cross_entropy_lines(self) -> list[str]:
        lines = self._target_lines()
        chunk = ["columns = start + tl.arange(0, COLUMNS)", "tile_mask = mask[:, None] & (columns < class_count)[None, :]"]
        chunk += self._loaded(self._row_indices("columns[None, :]", tile=True), "tile_mask")
        value = self.variables[self.loss.primary]
        chunk += [
            f"logits = tl.where(tile_mask, {value}, {NEGATIVE_INFINITY})",
            "chunk_max = tl.max(logits, axis=1)",
            "new_max = tl.maximum(running_max, chunk_max)",
            "# exp relative to the running maximum (0 while it is -inf, so a row of -inf sums nothing)",
            f"shift = tl.where(new_max == {NEGATIVE_INFINITY}, 0.0, new_max)",
            "running_total = running_total * tl.exp(running_max - shift) + tl.sum(tl.exp(logits - shift[:, None]), axis=1)",
            "running_max = new_max",
            f"picked += tl.sum(tl.where(tile_mask & (columns[None, :] == {self.target}[:, None]), {value}, 0.0), axis=1)",
        ]
        lines += [
            "# online logsumexp over the classes, COLUMNS at a time, picking each row's target logit on the way",
            f"running_max = tl.full([BLOCK], {NEGATIVE_INFINITY}, tl.float32)",
            "running_total = tl.zeros([BLOCK], tl.float32)",
            "picked = tl.zeros([BLOCK], tl.float32)",
            "for start in range(0, class_count, COLUMNS):",
        ]
        lines += [INDENT + line for line in chunk]
        lines += [
            "# log_softmax at the target, in PyTorch's order: x[t] - max - log(sum(exp(x - max)))",
            f"shift = tl.where(running_max == {NEGATIVE_INFINITY}, 0.0, running_max)",
            "log_probability = picked - shift - tl.log(running_total)",
        ]
        if self.dtype != "float32":
            lines.append(f"log_probability = {self._rounded('log_probability')}")
        return lines + self._class_loss_lines("log_probability")

    def _row_lines(self) -> list[str]:
        loss = self.loss
        operands = dict(loss.operands)
        if loss.kind == "cosine_similarity":
            sums = {"products": ("x1", "x2"), "squares1": ("x1", "x1"), "squares2": ("x2", "x2")}
        elif loss.kind == "pairwise_distance":
            sums = {"distance": ("x1", "x2")}
        else:
            sums = {"positive_distance": ("anchor", "positive"), "negative_distance": ("anchor", "negative")}
            if loss.option("swap"):
                sums["swap_distance"] = ("positive", "negative")
        accumulators = {name: self.scope.fresh(f"{name}_lanes") for name in sums}
        differences = {name: self.scope.fresh(f"{name}_difference") for name in sums}
        lines = [f"{accumulator} = tl.zeros([BLOCK, COLUMNS], tl.float32)" for accumulator in accumulators.values()]
        chunk = ["columns = start + tl.arange(0, COLUMNS)", "tile_mask = mask[:, None] & (columns < reduced_size)[None, :]"]
        chunk += self._loaded(self._row_indices("columns[None, :]", tile=True), "tile_mask")
        variables = {role: self.variables[value] for role, value in operands.items()}
        if loss.kind == "cosine_similarity":
            chunk.append("# masked-off lanes add nothing")
            for name, (left, right) in sums.items():
                chunk.append(f"{accumulators[name]} += tl.where(tile_mask, {variables[left]} * {variables[right]}, 0.0)")
        else:
            eps = float_literal(loss.option("eps"))
            chunk.append(f"# pairwise_distance: the p-norm of x1 - x2 + eps ({eps}); masked-off lanes add nothing")
            for name, (left, right) in sums.items():
                difference = differences[name]
                shifted = self._rounded(f"{variables[left]} - {variables[right]}") + f" + {eps}"
                chunk.append(f"{difference} = {self._rounded(shifted)}")
                chunk.append(f"{accumulators[name]} += tl.where(tile_mask, {self._norm_element(difference)}, 0.0)")
        lines.append("for start in range(0, reduced_size, COLUMNS):")
        lines += [INDENT + line for line in chunk]
        totals = {name: f"tl.sum({accumulator}, axis=1)" for name, accumulator in accumulators.items()}
        if loss.kind == "cosine_similarity":
            eps = float_literal(loss.option("eps"))
            return lines + [
                "# PyTorch's sum((x1 / max(|x1|, eps)) * (x2 / max(|x2|, eps))) in one pass: the dot product over",
                "# the product of the norms, each norm clamped at eps on its own",
                f"norm1 = tl.sqrt_rn({totals['squares1']})",
                f"norm2 = tl.sqrt_rn({totals['squares2']})",
                f"norm1 = tl.where(norm1 < {eps}, {eps}, norm1)",
                f"norm2 = tl.where(norm2 < {eps}, {eps}, norm2)",
                f"element = tl.div_rn({totals['products']}, norm1 * norm2)",
            ]
        if loss.kind == "pairwise_distance":
            return lines + [f"element = {self._norm_finish(totals['distance'])}"]
        lines += [
            f"positive_distance = {self._norm_finish(totals['positive_distance'])}",
            f"negative_distance = {self._norm_finish(totals['negative_distance'])}",
        ]
        if self.dtype != "float32":
            lines += [
                f"positive_distance = {self._rounded('positive_distance')}",
                f"negative_distance = {self._rounded('negative_distance')}",
            ]
        if loss.option("swap"):
            lines += [
                "# the distance swap: the closer of anchor-negative and positive-negative (NaN propagates)",
                f"negative_distance = tl.minimum(negative_distance, {self._norm_finish(totals['swap_distance'])}, "
                "propagate_nan=tl.PropagateNan.ALL)",
            ]
        margin = float_literal(loss.option("margin"))
        return lines + [
            f"element = {self._rounded(f'{margin} + positive_distance')} - negative_distance",
            f"element = {clamp_min_zero('element')}",
        ]

    def _norm_element(self, difference: str) -> str:
        p = self.loss.option("p")
        if p == 2.0:
            return f"{difference} * {difference}"
        if p == 1.0:
            return f"tl.abs({difference})"
        # |d| ** p through exp2/log2: log2(0) = -inf gives 0, as pow does for p > 0
        return f"tl.exp2({p!r} * tl.log2(tl.abs({difference})))"

    def _norm_finish(self, total: str) -> str:
        p = self.loss.option("p")
        if p == 2.0:
            return f"tl.sqrt_rn({total})"
        if p == 1.0:
            return total
        return f"tl.exp2(tl.log2({total}) * {1.0 / p!r})"

    # --- kernels ------------------------------------------------------------------------------

    def render(self) -> str:
        self._name_wrapper_values()
        if not self.reduces:
            kernel = self._map_kernel()
        elif self.partials:
            kernel = self._partials_kernel() + "\n\n" + self._finish_kernel()
        else:
            kernel = self._single_kernel()
        return kernel + "\n\n" + self._wrapper()

    def _name_wrapper_values(self) -> None:
        """The launch wrapper's variable names, taken before the kernels so both sides of each argument are known."""
        plan, loss = self.plan, self.loss
        scope = self.wrapper_scope = self.context.scope()
        self.tensors = {value: scope.fresh(value) for value in plan.inputs}
        self.outputs = {value: scope.fresh(value) for value in plan.outputs}
        self.domain_shape = scope.fresh("domain_shape")
        self.position_shape = self.domain_shape if loss.family == "elementwise" else scope.fresh("position_shape")
        self.position_count, self.block = scope.fresh("positions"), scope.fresh("BLOCK")
        self.setup_lines = self.reads.setup_lines(self.tensors, scope, self.context.helpers)
        self.setup_lines += self.epilogue_reads.setup_lines(self.tensors, scope, self.context.helpers)
        self.stride_lines, stride_arguments, self.flag_arguments = self.reads.wrapper_arguments(self.tensors, scope)
        self.output_shape = "()" if self.reduces else self.position_shape
        epilogue_stride_lines, epilogue_stride_arguments, self.epilogue_flag_arguments = (
            self.epilogue_reads.wrapper_arguments(self.tensors, scope)
        )
        self.stride_lines += epilogue_stride_lines
        self.read_pairs = list(zip(self.reads.pointer_parameters(), self.reads.pointer_arguments(self.tensors)))
        if self.target:
            self.read_pairs.append((self.target_pointer, self.tensors[loss.operand("target")]))
        if self.weight_pointer:
            self.read_pairs.append((self.weight_pointer, self.tensors[loss.operand("weight")]))
        self.epilogue_pairs = list(
            zip(self.epilogue_reads.pointer_parameters(), self.epilogue_reads.pointer_arguments(self.tensors))
        )
        pointers = self._output_pointers()
        self.output_pairs = [(pointers[value], self.outputs[value]) for value in plan.outputs]
        self.size_pairs = [("positions", self.position_count)]
        if loss.family == "classes":
            self.size_pairs.append(("class_count", f"{self.domain_shape}[{loss.reduced_dim}]"))
        elif loss.family == "rows":
            self.size_pairs.append(("reduced_size", f"{self.domain_shape}[{loss.reduced_dim}]"))
        self.size_pairs += [(name, f"{self.position_shape}[{dim}]") for dim, name in self.size_names.items()]
        self.stride_pairs = list(zip(self.reads.stride_parameters(), stride_arguments))
        if self.target:
            target = self.tensors[loss.operand("target")]
            self.stride_pairs += [(name, f"{target}.stride({dim})") for dim, name in self.target_strides.items()]
        if self.weight_stride:
            self.stride_pairs.append((self.weight_stride, f"{self.tensors[loss.operand('weight')]}.stride(0)"))
        if not self.reduces:
            self.stride_pairs += list(zip(self.epilogue_reads.stride_parameters(), epilogue_stride_arguments))
        self.partial_pairs: list[tuple[str, str]] = []
        if self.partials:
            self.finish_kernel = self.context.scope().fresh(f"{plan.wrapper}_finish_kernel")
            self.partial_count = scope.fresh("partial_count")
            self.partial_pairs = [("partials_ptr", scope.fresh("partials"))]
            if self._weighted_mean():
                self.partial_pairs.append(("weight_partials_ptr", scope.fresh("weight_partials")))

    def _position_block(self, first_position: str) -> list[str]:
        variable = self.position_variable
        return [
            "# int64 positions: offsets into large inputs may exceed 2**31",
            f"{variable} = {first_position} + tl.arange(0, BLOCK).to(tl.int64)",
            "# mask guards the last block",
            f"mask = {variable} < positions",
        ]

    def _main_pairs(self, buffers: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """(parameter, argument) of the per-position kernel, `buffers` being what it writes."""
        return self.read_pairs + buffers + self.size_pairs + self.stride_pairs

    def _map_kernel(self) -> str:
        """reduction='none': one loss per position, stored with the epilogue applied."""
        body = ["pid = tl.program_id(0)"] + self._position_block("pid.to(tl.int64) * BLOCK") + self._loss_lines()
        body.append(f"{self.result} = element")
        body += self._epilogue(vector=True)
        pairs = self._main_pairs(self.epilogue_pairs + self.output_pairs)
        description = self._description("one loss per position")
        return self._kernel_source(self.plan.kernel, pairs, self._main_flags(), description, body)

    def _single_kernel(self) -> str:
        body = self._accumulator_lines()
        body.append("for start in range(0, positions, BLOCK):")
        loop = self._position_block("start") + self._loss_lines() + self._accumulate()
        body += [INDENT + line for line in loop]
        body += ["total = tl.sum(totals, axis=0)"]
        if self._weighted_mean():
            body.append("weight_total = tl.sum(weight_totals, axis=0)")
        body += self._finish()
        pairs = self._main_pairs(self.epilogue_pairs + self.output_pairs)
        how = "one program walks every position in BLOCK-sized steps, adding per-lane float32 sums"
        return self._kernel_source(self.plan.kernel, pairs, self._main_flags(), self._description(how), body)

    def _partials_kernel(self) -> str:
        body = ["pid = tl.program_id(0)"] + self._position_block("pid.to(tl.int64) * BLOCK") + self._loss_lines()
        body.append("# this program's share of the sum; the finishing kernel adds the shares in program order")
        body.append("tl.store(partials_ptr + pid, tl.sum(tl.where(mask, element, 0.0), axis=0))")
        if self._weighted_mean():
            body.append("tl.store(weight_partials_ptr + pid, tl.sum(element_weight, axis=0))")
        how = "each program adds the losses of BLOCK positions into one float32 partial sum"
        return self._kernel_source(
            self.plan.kernel, self._main_pairs(self.partial_pairs), self._main_flags(), self._description(how), body
        )

    def _finish_kernel(self) -> str:
        weighted = self._weighted_mean()
        body = ["totals = tl.zeros([BLOCK], tl.float32)"]
        if weighted:
            body.append("weight_totals = tl.zeros([BLOCK], tl.float32)")
        body += [
            "for start in range(0, partial_count, BLOCK):",
            f"{INDENT}offsets = start + tl.arange(0, BLOCK)",
            f"{INDENT}totals += tl.load(partials_ptr + offsets, mask=offsets < partial_count, other=0.0)",
        ]
        if weighted:
            body.append(
                f"{INDENT}weight_totals += tl.load(weight_partials_ptr + offsets, mask=offsets < partial_count, other=0.0)"
            )
        body.append("total = tl.sum(totals, axis=0)")
        if weighted:
            body.append("weight_total = tl.sum(weight_totals, axis=0)")
        body += self._finish()
        pairs = (
            self.partial_pairs
            + self.epilogue_pairs
            + self.output_pairs
            + self._finish_pairs()
        )
        epilogue = " and the epilogue" if self.plan.epilogue else ""
        docstring = [
            f"Finishes {self.plan.kernel} in one program: adds its partial sums in a fixed order (deterministic),",
            f"then applies the {REDUCTIONS[self.loss.reduction]} reduction{epilogue}.",
        ]
        return self._kernel_source(self.finish_kernel, pairs, [], docstring, body, columns=False)

    def _finish_pairs(self) -> list[tuple[str, str]]:
        """The finishing kernel's sizes: the partial count, and the position count a plain mean divides by."""
        plain_mean = self.loss.reduction == 1 and not self._weighted_mean()
        return [("partial_count", self.partial_count)] + ([("positions", self.position_count)] if plain_mean else [])

    def _main_flags(self) -> list[str]:
        return self.reads.flag_parameters() + (self.epilogue_reads.flag_parameters() if not self.reduces else [])

    def _weighted_mean(self) -> bool:
        """Class losses average over the counted rows' weights, not over the positions."""
        return self.loss.family == "classes" and self.loss.reduction == 1

    def _accumulator_lines(self) -> list[str]:
        lines = ["totals = tl.zeros([BLOCK], tl.float32)"]
        if self._weighted_mean():
            lines.append("weight_totals = tl.zeros([BLOCK], tl.float32)")
        return lines

    def _accumulate(self) -> list[str]:
        lines = ["totals += tl.where(mask, element, 0.0)"]
        if self._weighted_mean():
            lines.append("weight_totals += element_weight")
        return lines

    def _finish(self) -> list[str]:
        if self.loss.reduction == 2:
            lines = [f"{self.result} = total"]
        elif self._weighted_mean():
            lines = ["# the mean over counted rows, weighted by their class weights (NaN if every row is ignored)"]
            lines.append(f"{self.result} = tl.div_rn(total, weight_total)")
        else:
            lines = [f"{self.result} = tl.div_rn(total, positions * 1.0)"]
        return lines + self._epilogue(vector=False)

    def _epilogue(self, vector: bool) -> list[str]:
        plan = self.plan
        lines: list[str] = []
        if plan.epilogue:
            if self.dtype != "float32":
                lines += [
                    f"# the epilogue reads the {self.dtype} tensor PyTorch would store",
                    f"{self.result} = {self._rounded(self.result)}",
                ]
            if vector:
                index_of_dim = {dim: self.index[dim] for dim in self.epilogue_reads.indexed_dims}
                lines += self.epilogue_reads.load_lines(index_of_dim, "mask", flat_offsets=self.position_variable)
            else:
                lines += self.epilogue_reads.load_lines({}, None)
            lines += elementwise_lines(self.graph, plan.epilogue, self.epilogue_variables, self.scope, self.context.helpers)
        pointers = self._output_pointers()
        if vector:
            lines.append("# the outputs are new contiguous tensors: a position's offset is its flat index")
        for value in plan.outputs:
            dtype = self.dtype if value == plan.anchor else self.graph.spec_of(value).dtype
            variable = stored(self.epilogue_variables[value], dtype)
            if vector:
                lines.append(f"tl.store({pointers[value]} + {self.position_variable}, {variable}, mask=mask)")
            else:
                lines.append(f"tl.store({pointers[value]}, {variable})")
        return lines

    def _output_pointers(self) -> dict[str, str]:
        if not hasattr(self, "_pointers"):
            self._pointers = {
                value: self.scope.fresh(f"{value}_ptr") for value in self.plan.outputs
            }
        return self._pointers

    def _uses_columns(self) -> bool:
        return self.loss.family == "rows" or self.loss.kind == "cross_entropy"

    def _description(self, how: str) -> list[str]:
        loss = self.loss
        if loss.family == "elementwise":
            what = f"one {loss.kind} loss per element of the {domain_text(loss.domain)} broadcast domain"
        elif loss.family == "classes":
            picked = "its target class's entry" if loss.kind == "nll" else "a logsumexp over the classes"
            what = f"one loss per target element from {picked} (dim {loss.reduced_dim} of {domain_text(loss.domain)})"
        else:
            what = f"one {loss.kind} per row of {domain_text(loss.domain)}, dim {loss.reduced_dim} folded COLUMNS at a time"
        return [f"Computes {what};", f"reduction {REDUCTIONS[loss.reduction]}: {how}."]

    def _kernel_source(
        self, name: str, pairs: list[tuple[str, str]], flags: list[str], docstring: list[str], body: list[str],
        columns: bool = True,
    ) -> str:
        replaced = f"{self.nodes[self.plan.anchor].op} ({self.plan.anchor})"
        if self.plan.prologue:
            replaced += ", after " + ", ".join(f"{self.nodes[member].op} ({member})" for member in self.plan.prologue)
        if self.plan.epilogue:
            replaced += ", then " + ", ".join(f"{self.nodes[member].op} ({member})" for member in self.plan.epilogue)
        parameters = [parameter for parameter, _ in pairs] + flags + ["BLOCK: tl.constexpr"]
        if columns and self._uses_columns():
            parameters.append("COLUMNS: tl.constexpr")
        lines = ["@triton.jit", f"def {name}("]
        lines += [f"{INDENT}{parameter}," for parameter in parameters]
        lines += ["):", f'{INDENT}"""Replaces {replaced}.', ""]
        lines += [f"{INDENT}{line}" for line in docstring]
        lines += [f'{INDENT}"""']
        lines += [f"{INDENT}{line}" for line in body]
        return "\n".join(lines) + "\n"

    # --- wrapper ------------------------------------------------------------------------------

    def _wrapper(self) -> str:
        plan, graph, loss = self.plan, self.graph, self.loss
        block, outputs = self.block, self.outputs
        device = f"{self.reads.pointer_arguments(self.tensors)[0]}.device"
        launches = f"{plan.kernel}, then {self.finish_kernel}" if self.partials else f"one launch of {plan.kernel}"
        lines = [f'"""Computes {", ".join(plan.nodes)} ({launches}); returns {", ".join(outputs.values())}."""']
        lines += self.setup_lines
        full_shape = [read for read in self.reads.reads if read.spec.shape == loss.domain]
        if full_shape:
            lines.append(f"{self.domain_shape} = {self.reads.shape_of(full_shape[0], self.tensors)}")
        else:
            shapes = ", ".join(self.reads.shape_of(read, self.tensors) for read in self.reads.reads)
            lines.append(f"{self.domain_shape} = torch.broadcast_shapes({shapes})")
        if loss.family != "elementwise":
            folded = loss.reduced_dim
            lines.append(f"{self.position_shape} = {self.domain_shape}[:{folded}] + {self.domain_shape}[{folded + 1}:]")
        if loss.family == "classes" and loss.option("check_rows"):
            target = self.tensors[loss.operand("target")]
            lines += [
                f"if {target}.shape != {self.position_shape}:",
                f"{INDENT}raise RuntimeError(",
                f'{INDENT * 2}f"expected target size {{list({self.position_shape})}}, got {{list({target}.shape)}}"',
                f"{INDENT})",
            ]
        lines.append(f"{self.position_count} = {self.position_shape}.numel()")
        for value, variable in outputs.items():
            dtype = self.dtype if value == plan.anchor else graph.spec_of(value).dtype
            lines.append(f"{variable} = torch.empty({self.output_shape}, dtype=torch.{dtype}, device={device})")
        lines += self.stride_lines
        lines.append(f"{block} = {plan.params['block']}")
        keywords = self.flag_arguments + (self.epilogue_flag_arguments if not self.reduces else []) + [f"BLOCK={block}"]
        if self._uses_columns():
            keywords.append(f"COLUMNS={plan.params['columns']}")
        keywords.append(f"num_warps={plan.params['warps']}")
        if not self.reduces:
            grid = self.wrapper_scope.fresh("grid")
            lines += [
                f"# one program per block of {block} positions",
                f"{grid} = (triton.cdiv({self.position_count}, {block}),)",
            ]
            lines += _launch(plan.kernel, grid, self._main_pairs(self.epilogue_pairs + self.output_pairs), keywords)
        elif not self.partials:
            lines.append("# one program adds up every position in a fixed order, so the result is deterministic")
            lines += _launch(plan.kernel, "(1,)", self._main_pairs(self.epilogue_pairs + self.output_pairs), keywords)
        else:
            lines += [
                f"# one program per block of {block} positions writes a partial sum; a second kernel adds them in order",
                f"{self.partial_count} = triton.cdiv({self.position_count}, {block})",
            ]
            for _, buffer in self.partial_pairs:
                lines.append(f"{buffer} = torch.empty({self.partial_count}, dtype=torch.float32, device={device})")
            lines += _launch(plan.kernel, f"({self.partial_count},)", self._main_pairs(self.partial_pairs), keywords)
            finish_pairs = (
                self.partial_pairs
                + self.epilogue_pairs
                + self.output_pairs
                + self._finish_pairs()
            )
            finish_keywords = [f"BLOCK={FINISH_BLOCK}", f"num_warps={plan.params['warps']}"]
            lines += _launch(self.finish_kernel, "(1,)", finish_pairs, finish_keywords)
        lines.append(f"return {', '.join(outputs.values())}")
        header = f"def {plan.wrapper}({', '.join(self.tensors.values())}):"
        return "\n".join([header] + [INDENT + line for line in lines]) + "\n"


def _launch(kernel: str, grid: str, pairs: list[tuple[str, str]], keywords: list[str]) -> list[str]:
    """A kernel launch passing each pair's argument in the kernel's parameter order, then the keywords."""
    arguments = [argument for _, argument in pairs] + keywords
    return [f"{kernel}[{grid}]("] + [f"{INDENT}{argument}," for argument in arguments] + [")"]
