"""Fusion partition: group the graph's ops into kernels (pointwise chains, or an anchor op with its
prologue and epilogue) and ops kept in PyTorch.

Structural only (each op's role is the caller's callback), so it holds for any DAG and is
property-tested on random ones. Steps come out in an order that respects every dependency.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence, Union

from drtriton_lsp.compiler.graph import Dim, OpNode


@dataclass(frozen=True)
class Pointwise:
    """An elementwise op that can fuse with others of the same output shape (its domain)."""

    domain: tuple[Dim, ...]


@dataclass(frozen=True)
class Anchored:
    """An op a template builds a kernel around.

    primary_input: the value a prologue may compute in the kernel (None: no prologue).
    input_domain: that value's shape; output_domain: where epilogue ops run (None: no epilogue).
    """

    template: str
    primary_input: str | None
    input_domain: tuple[Dim, ...]
    output_domain: tuple[Dim, ...] | None


Role = Union[Pointwise, Anchored, None]  # None: the op stays a PyTorch call


@dataclass(frozen=True)
class GroupStep:
    """Ops computed by one kernel, in graph order. anchor: the template's op (None: pointwise).

    domain: the output domain the pointwise members (epilogue) run over; in a pointwise kernel a member of a smaller
    shape that broadcasts to it is computed for each of its elements, and read only inside the kernel.
    """

    members: tuple[str, ...]
    domain: tuple[Dim, ...] | None
    template: str = "pointwise"
    anchor: str | None = None


@dataclass(frozen=True)
class KeepStep:
    """One op that stays a PyTorch call."""

    node: str


@dataclass
class _OpenGroup:
    domain: tuple[Dim, ...] | None
    template: str = "pointwise"
    anchor: str | None = None
    members: list[str] = field(default_factory=list)


def partition_graph(
    nodes: Sequence[OpNode],
    role_of: Callable[[OpNode], Role],
    is_mutating: Callable[[OpNode], bool],
    readers: dict[str, list[str]],
    implied: frozenset[str] = frozenset(),
) -> list[GroupStep | KeepStep]:
    """Greedy, convex fusion in graph (topological) order.

    A pointwise op joins the open group(s) of its domain it reads from (merging them; at most one
    of them anchored), or starts one; into a pointwise group it also takes an open pointwise group of a smaller
    domain that broadcasts to its own and that nothing else reads (`_inlines_into`). An anchored op starts a group,
    taking as its prologue the open pointwise group that computes its primary input when nothing else reads that
    group's values.
    A group closes, and its step is emitted, just before the first op outside it that reads one of
    its values. `implied` ops (views, tuple reads) are not placed: they run when first needed, so an
    op reading a group through one of them reads it from outside, and the group closes first.
    An op that writes into its inputs closes every open group. readers: value -> ops reading it.
    """
    order = {node.name: position for position, node in enumerate(nodes)}
    by_name = {node.name: node for node in nodes}
    steps: list[GroupStep | KeepStep] = []
    open_groups: list[_OpenGroup] = []
    open_group_of: dict[str, _OpenGroup] = {}

    def close(group: _OpenGroup) -> None:
        open_groups.remove(group)
        for member in group.members:
            del open_group_of[member]
        steps.append(GroupStep(tuple(group.members), group.domain, group.template, group.anchor))

    def direct_and_implied_reads(node: OpNode) -> tuple[list[str], set[str]]:
        direct = [ref for ref in node.input_refs() if ref not in implied]
        through: set[str] = set()
        pending = [ref for ref in node.input_refs() if ref in implied]
        while pending:
            ref = pending.pop()
            source = by_name.get(ref)
            for inner in source.input_refs() if source is not None else ():
                if inner in implied:
                    pending.append(inner)
                else:
                    through.add(inner)
        return direct, through

    def groups_of(values) -> list[_OpenGroup]:
        found: list[_OpenGroup] = []
        for value in values:
            group = open_group_of.get(value)
            if group is not None and group not in found:
                found.append(group)
        return found

    def add(group: _OpenGroup, node_name: str) -> None:
        group.members.append(node_name)
        group.members.sort(key=order.__getitem__)
        open_group_of[node_name] = group

    for node in nodes:
        if node.name in implied:
            continue
        role = role_of(node)
        direct, through = direct_and_implied_reads(node)
        # in graph order (a set's order would change with the interpreter's string hashing, and with it the steps)
        for group in sorted(groups_of(through), key=lambda group: order[group.members[0]]):
            close(group)
        if is_mutating(node) or role is None:
            for group in list(open_groups) if is_mutating(node) else groups_of(direct):
                close(group)
            steps.append(KeepStep(node.name))
        elif isinstance(role, Pointwise):
            joinable: list[_OpenGroup] = []
            broadcast: list[_OpenGroup] = []
            for group in groups_of(direct):
                anchored_twice = group.anchor is not None and any(other.anchor for other in joinable)
                if group.domain == role.domain and not anchored_twice:
                    joinable.append(group)
                elif _inlines_into(group, node.name, role.domain, readers):
                    broadcast.append(group)
                else:
                    close(group)
            if not joinable:
                target = _OpenGroup(role.domain)
                open_groups.append(target)
            else:
                target = next((group for group in joinable if group.anchor), joinable[0])
            if target.anchor is not None:
                for group in broadcast:
                    close(group)  # an anchored kernel's epilogue reads stored values only
                broadcast = []
            for other in joinable + broadcast:
                if other is not target:
                    open_groups.remove(other)
                    for member in other.members:
                        add(target, member)
            add(target, node.name)
        else:
            prologue = _prologue_group(node, role, direct, open_group_of, readers, by_name)
            for group in groups_of(direct):
                if group is not prologue:
                    close(group)
            target = _OpenGroup(role.output_domain, role.template, node.name)
            if prologue is not None:
                open_groups.remove(prologue)
                for member in prologue.members:
                    del open_group_of[member]
                    add(target, member)
            open_groups.append(target)
            add(target, node.name)
            if role.output_domain is None:
                close(target)
    for group in list(open_groups):
        close(group)
    return steps


def broadcasts_to(smaller: tuple[Dim, ...], domain: tuple[Dim, ...]) -> bool:
    """Whether values of shape `smaller` broadcast to `domain`: no more dims, aligned at the last, each size equal or 1."""
    if len(smaller) > len(domain):
        return False
    aligned = domain[len(domain) - len(smaller):]
    return all(size == 1 or size == wanted for size, wanted in zip(smaller, aligned))


def broadcast_domain(domains: set[tuple[Dim, ...]]) -> tuple[Dim, ...] | None:
    """The one of `domains` that every other broadcasts to, or None."""
    return next((candidate for candidate in domains if all(broadcasts_to(other, candidate) for other in domains)), None)


def _inlines_into(group: _OpenGroup, reader: str, domain: tuple[Dim, ...], readers: dict[str, list[str]]) -> bool:
    """Whether an open pointwise group of a smaller domain is computed inside `reader`'s kernel instead of stored: its
    domain broadcasts to `domain` (aligned at the last dims, each size equal or 1) and nothing but its own members and
    `reader` reads its values. The kernel then computes those ops for every element of the larger domain, reading
    their inputs broadcast, as Inductor inlines pointwise producers into their consumers."""
    if group.anchor is not None or group.domain is None or group.domain == domain:
        return False
    if not broadcasts_to(group.domain, domain):
        return False
    members = set(group.members)
    return all(
        other in members or other == reader for member in group.members for other in readers.get(member, [])
    )


def _prologue_group(
    anchor: OpNode,
    role: Anchored,
    direct: list[str],
    open_group_of: dict[str, _OpenGroup],
    readers: dict[str, list[str]],
    by_name: dict[str, OpNode],
) -> _OpenGroup | None:
    """The open pointwise group that can become `anchor`'s prologue, if any.

    It must compute the primary input in the input domain, every member must feed it, and its
    values must be read by nothing but its own members and, for the primary input only, the anchor.
    """
    if role.primary_input is None:
        return None
    group = open_group_of.get(role.primary_input)
    if group is None or group.anchor is not None or group.domain != role.input_domain:
        return None
    members = set(group.members)
    if any(ref in members and ref != role.primary_input for ref in direct):
        return None
    feeding = {role.primary_input}
    pending = [role.primary_input]
    while pending:
        for ref in by_name[pending.pop()].input_refs():
            if ref in members and ref not in feeding:
                feeding.add(ref)
                pending.append(ref)
    if feeding != members:
        return None
    for member in group.members:
        for reader in readers.get(member, []):
            if reader in members or (reader == anchor.name and member == role.primary_input):
                continue
            return None
    return group


def group_inputs(nodes_by_name: dict[str, OpNode], members: Sequence[str]) -> list[str]:
    """Values a group reads from outside itself, in order of first use."""
    member_set = set(members)
    inputs: list[str] = []
    for member in members:
        for ref in nodes_by_name[member].input_refs():
            if ref not in member_set and ref not in inputs:
                inputs.append(ref)
    return inputs


def group_outputs(readers: dict[str, list[str]], members: Sequence[str]) -> list[str]:
    """Member values read outside the group (by another op, or "<output>": the graph's return).

    readers: value name -> names of what reads it, as `OpGraph.users()` gives.
    """
    member_set = set(members)
    return [
        member
        for member in members
        if any(reader not in member_set for reader in readers.get(member, []))
    ]
