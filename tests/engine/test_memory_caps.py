"""Worker memory caps follow the task's size and the machine: a 6.4 GB single op is not refused by a fixed 8 GiB cap,
a small task keeps that cap, the machine's share bounds every cap, and a cap given explicitly stands."""

from __future__ import annotations

import psutil
import pytest

from drtriton_lsp.compiler.graph import GraphInput, OpGraph, OpNode, TensorSpec
from drtriton_lsp.engine.memory_caps import (
    COMPILE_BYTES_PER_OP, FLOOR_BYTES, RUNTIME_BYTES, TENSOR_COPIES, task_bytes, task_memory_cap, with_task_memory_caps,
)
from drtriton_lsp.runners import runner
from drtriton_lsp.runners.runner import MACHINE_MEMORY_SHARE, JobLimits, machine_memory_bytes

GiB = 1024**3


def softmax_graph(rows, columns, dtype="float32", hints=None) -> OpGraph:
    """x -> softmax(x), the output as large as the input."""
    spec = TensorSpec((rows, columns), dtype)
    return OpGraph(
        inputs=[GraphInput("x", "user_input", "x", spec)],
        nodes=[OpNode("softmax", "aten.softmax.int", ({"ref": "x"}, -1), {}, (spec,))],
        outputs=[{"ref": "softmax"}],
        returns_tuple=False,
        symbol_hints=hints or {},
    )


@pytest.fixture
def machine_of(monkeypatch):
    def set_machine(total_bytes: int) -> None:
        monkeypatch.setattr(runner, "machine_memory_bytes", lambda: total_bytes)

    return set_machine


def test_a_large_single_op_gets_room_for_its_copies(machine_of):
    machine_of(1024 * GiB)
    graph = softmax_graph(4096, 393216)  # 6.4 GB in, 6.4 GB out
    assert task_bytes(graph) == 2 * 4096 * 393216 * 4
    assert task_memory_cap(graph) == RUNTIME_BYTES + TENSOR_COPIES * task_bytes(graph) + COMPILE_BYTES_PER_OP
    assert JobLimits(memory_bytes=task_memory_cap(graph)).memory_cap() == task_memory_cap(graph)


def test_a_network_of_many_small_ops_gets_room_to_compile_them(machine_of):
    """The H200 benchmark of an 85-op network with 42 MB of tensors held 8.4 GiB, over the fixed 8 GiB."""
    machine_of(128 * GiB)
    one_op = softmax_graph(64, 128)
    network = OpGraph(
        inputs=one_op.inputs, outputs=[{"ref": "op84"}], returns_tuple=False,
        nodes=[OpNode(f"op{index}", "aten.relu.default", ({"ref": f"op{index - 1}" if index else "x"},), {},
                      (TensorSpec((64, 128), "float32"),)) for index in range(85)],
    )
    assert task_memory_cap(one_op) == FLOOR_BYTES
    assert task_memory_cap(network) > 8.4 * GiB
    assert JobLimits(memory_bytes=task_memory_cap(network)).memory_cap() == task_memory_cap(network)


def test_the_machine_that_runs_the_worker_bounds_the_cap(machine_of):
    graph = softmax_graph(4096, 393216)
    machine_of(128 * GiB)
    assert JobLimits(memory_bytes=task_memory_cap(graph)).memory_cap() == int(128 * GiB * MACHINE_MEMORY_SHARE)
    machine_of(1024 * GiB)  # the same limits on a larger machine (a remote GPU host computes the cap there)
    assert JobLimits(memory_bytes=task_memory_cap(graph)).memory_cap() == task_memory_cap(graph)


def test_a_small_task_keeps_the_fixed_cap_it_had(machine_of):
    machine_of(128 * GiB)
    assert task_memory_cap(softmax_graph(64, 128)) == FLOOR_BYTES
    assert JobLimits(memory_bytes=task_memory_cap(softmax_graph(64, 128))).memory_cap() == FLOOR_BYTES


def test_free_sizes_count_at_their_example_values():
    graph = softmax_graph("s0", "2*s1", "bfloat16", hints={"s0": 1000, "s1": 300})
    assert task_bytes(graph) == 2 * 1000 * 600 * 2


def test_a_cap_given_explicitly_stands_and_a_missing_one_is_derived(machine_of):
    machine_of(1024 * GiB)
    graph = softmax_graph(4096, 393216)
    assert with_task_memory_caps(JobLimits(memory_bytes=2 * GiB), graph).memory_bytes == 2 * GiB
    assert with_task_memory_caps(JobLimits(timeout_s=60), graph) == JobLimits(timeout_s=60, memory_bytes=task_memory_cap(graph))


def test_a_job_without_a_cap_may_use_the_machines_share():
    assert JobLimits().memory_cap() == int(machine_memory_bytes() * MACHINE_MEMORY_SHARE)


def test_a_containers_limit_below_the_machines_memory_is_the_machines_memory(tmp_path, monkeypatch):
    limit = tmp_path / "memory.max"
    limit.write_text(f"{2 * GiB}\n")
    monkeypatch.setattr(runner, "CGROUP_MEMORY_LIMITS", (tmp_path / "absent", limit))
    assert machine_memory_bytes() == min(2 * GiB, psutil.virtual_memory().total)
    limit.write_text("max\n")
    assert machine_memory_bytes() == psutil.virtual_memory().total
