"""Fusion partition: split the graph's ops into fused elementwise groups and ops kept in PyTorch.

Structural only (which op is fusible is the caller's predicate), so it holds for any DAG and is
property-tested on random ones. Steps come out in an order that respects every dependency.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Sequence

from drtriton_lsp.compiler.graph import Dim, OpNode


@dataclass(frozen=True)
class GroupStep:
    """Fused ops sharing one iteration domain (their common output shape), in graph order."""

    members: tuple[str, ...]
    domain: tuple[Dim, ...]


@dataclass(frozen=True)
class KeepStep:
    """One op that stays a PyTorch call."""

    node: str


@dataclass
class _OpenGroup:
    domain: tuple[Dim, ...]
    members: list[str] = field(default_factory=list)


def partition_graph(
    nodes: Sequence[OpNode],
    is_fusible: Callable[[OpNode], bool],
    is_mutating: Callable[[OpNode], bool],
) -> list[GroupStep | KeepStep]:
    """Greedy, convex fusion in graph (topological) order.

    A fusible op joins the open group(s) of its domain it reads from (merging them), or starts one.
    A group closes, and its step is emitted, just before the first op outside it that reads one
    of its values, so every reader runs after the kernel that writes the value. A fused op that
    reads an open group of another domain closes that group first. An op that writes into its
    inputs closes every open group, since any of them might read the tensor it changes.
    Open groups never read each other (that would have merged or closed them), so merging is safe.
    """
    order = {node.name: position for position, node in enumerate(nodes)}
    steps: list[GroupStep | KeepStep] = []
    open_groups: list[_OpenGroup] = []
    open_group_of: dict[str, _OpenGroup] = {}

    def close(group: _OpenGroup) -> None:
        open_groups.remove(group)
        for member in group.members:
            del open_group_of[member]
        steps.append(GroupStep(tuple(group.members), group.domain))

    def open_groups_read_by(node: OpNode) -> list[_OpenGroup]:
        found: list[_OpenGroup] = []
        for ref in node.input_refs():
            group = open_group_of.get(ref)
            if group is not None and group not in found:
                found.append(group)
        return found

    for node in nodes:
        if is_fusible(node):
            domain = tuple(node.spec.shape)
            producers = open_groups_read_by(node)
            for group in producers:
                if group.domain != domain:
                    close(group)
            same_domain = [group for group in producers if group.domain == domain]
            if same_domain:
                target = same_domain[0]
                for other in same_domain[1:]:
                    target.members.extend(other.members)
                    open_groups.remove(other)
                target.members.sort(key=order.__getitem__)
            else:
                target = _OpenGroup(domain)
                open_groups.append(target)
            target.members.append(node.name)
            for member in target.members:
                open_group_of[member] = target
        else:
            readers_of = list(open_groups) if is_mutating(node) else open_groups_read_by(node)
            for group in readers_of:
                close(group)
            steps.append(KeepStep(node.name))
    for group in list(open_groups):
        close(group)
    return steps


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
