"""`drtriton bench`: summary math, bytes and FLOPs from a graph, the SVG charts, the Markdown, resuming,
Ctrl-C keeping partial results, and one end-to-end run on the CPU.

Everything but the end-to-end test works on synthetic records and hand-built graphs (no worker).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ElementTree

import pytest

from drtriton_lsp.bench import suite
from drtriton_lsp.bench.placement import LocalPlaces, local_places
from drtriton_lsp.bench.roofline import GraphWork, MatmulShape, broadcast_matmul_shape, einsum_shape, graph_work
from drtriton_lsp.bench.suite_plots import roofline_chart, speedup_chart
from drtriton_lsp.bench.suite_report import progress_line, render_markdown, write_results
from drtriton_lsp.compiler.graph import GraphInput, OpGraph, OpNode, TensorSpec
from drtriton_lsp.engine.gpu_memory import USABLE_SHARE
from drtriton_lsp.engine.gpus import GpuSlot
from drtriton_lsp.engine.pipeline import OptimizeOptions
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.local import LocalRunner
from drtriton_lsp.runners.protocol import GPU_LOCK_VARIABLE
from drtriton_lsp.runners.runner import JobFailure
from drtriton_lsp.worker import benchmark
from drtriton_lsp.worker.gpu_lock import gpu_hold

SVG = "{http://www.w3.org/2000/svg}"
H200 = {"kind": "cuda", "name": "NVIDIA H200"}
PIPELINE = {"trials": 5, "search": True, "search_seconds": 60.0}


def record(
    name, category, status="verified", vs_eager=None, vs_compile=None, fraction=None, ceiling="copy", latency=None,
    vs_max_autotune=None,
):
    """A results.json problem entry as the bench writes it, with only what a test needs.

    latency: (speedup vs eager, speedup vs torch.compile) of single calls to an idle GPU, or None (older runs).
    vs_max_autotune: the speedup vs torch.compile in mode max-autotune (bench --max-autotune), or None (not timed).
    """
    timing = None
    if vs_eager is not None:
        timing = {
            "eager_ms": 1.0,
            "compile_ms": 1.0 if vs_compile else None,
            "triton_ms": 1.0 / vs_eager,
            "speedup_vs_eager": vs_eager,
            "speedup_vs_compile": vs_compile,
            "flags": [],
        }
        if vs_max_autotune is not None:
            timing["compile_max_autotune_ms"] = vs_max_autotune / vs_eager
            timing["speedup_vs_compile_max_autotune"] = vs_max_autotune
        if latency is not None:
            timing["latency"] = {
                "eager_ms": 1.0, "compile_ms": 1.0, "triton_ms": 1.0 / latency[0],
                "speedup_vs_eager": latency[0], "speedup_vs_compile": latency[1],
            }
    roofline = None
    if fraction is not None:
        roofline = {
            "ceiling": ceiling,
            "fraction": fraction,
            "compile_fraction": fraction / 2,
            "bandwidth_fraction": fraction if ceiling == "copy" else 0.1,
            "flop_fraction": fraction if ceiling == "library" else None,
            "triton_gb_per_s": 1000.0,
            "triton_tflops": None,
        }
    return {
        "problem": name,
        "category": category,
        "dtypes": ["float32"],
        "status": status,
        "reason": None if status == "verified" else "mismatch",
        "message": "" if status == "verified" else "outputs differ at index 3",
        "timing": timing,
        "work": {"minimum_bytes": 2_000_000, "matmul_class": ceiling == "library", "matmuls": [], "matmul_flops": None},
        "roofline": roofline,
        "replaced_ops": ["aten.relu.default"],
        "kept_ops": [],
        "seconds": 12.0,
        "report": None,
    }


def gpu_results(records):
    results = suite.new_results(
        command="drtriton bench benchmarks/problems --device cuda",
        commit="0123abc",
        suite="benchmarks/problems",
        device=H200,
        versions={"python": "3.12.3", "torch": "2.11.0", "triton": "3.6.0", "cuda": "13.0"},
        pipeline=PIPELINE,
    )
    results["copy_bandwidth"].append({"bytes": 2**31, "ms": 0.5, "gb_per_s": 4295.0, "measured": "2026-11-29T10:00:00+00:00"})
    results["problems"] = records
    results["summary"] = suite.summarize(records, speed_measured=True)
    results["complete"] = True
    return results


SYNTHETIC = [
    record("single_op/relu.py", "single_op", vs_eager=2.0, vs_compile=0.5, fraction=0.9),
    record("single_op/softmax.py", "single_op", vs_eager=0.5, vs_compile=0.25, fraction=0.4),
    record("single_op/linear.py", "single_op", vs_eager=1.0, vs_compile=1.0, fraction=0.75, ceiling="library"),
    record("fusion/bias_gelu.py", "fusion", vs_eager=4.0, vs_compile=2.0, fraction=0.8),
    record("fusion/broken.py", "fusion", status="failed"),
]


def test_fast_1_counts_only_verified_and_strictly_faster_over_every_problem():
    summary = suite.summarize(SYNTHETIC, speed_measured=True)
    single, fusion, overall = summary["single_op"], summary["fusion"], summary["all"]
    assert list(summary) == ["single_op", "fusion", "all"]
    assert single["fast_1_vs_eager"] == pytest.approx(1 / 3)  # 2.0x is faster; 0.5x and exactly 1.0x are not
    assert single["fast_1_vs_compile"] == 0.0
    assert fusion["fast_1_vs_eager"] == 0.5  # the failed problem counts in the denominator
    assert fusion["fast_1_vs_compile"] == 0.5
    assert overall["problems"] == 5 and overall["verified"] == 4
    assert overall["fast_1_vs_eager"] == pytest.approx(2 / 5)


def test_kernels_slower_than_eager_are_counted_and_listed_as_pytorch_kept():
    summary = suite.summarize(SYNTHETIC, speed_measured=True)
    assert summary["single_op"]["pytorch_kept"] == 1  # 0.5x; exactly 1.0x is written back (not slower)
    assert summary["fusion"]["pytorch_kept"] == 0 and summary["all"]["pytorch_kept"] == 1
    markdown = render_markdown(gpu_results(SYNTHETIC))
    assert "| slower than eager: PyTorch kept | 1 of 3 | 0 of 1 | 1 of 4 |" in markdown
    kept_section = markdown.split("## Slower than eager: PyTorch kept")[1].split("##")[0]
    assert "- single_op/softmax.py: 0.50x vs eager" in kept_section
    assert "relu" not in kept_section and "broken" not in kept_section
    older = gpu_results(SYNTHETIC)
    for group in older["summary"].values():
        del group["pytorch_kept"]  # results.json written before the count
    assert "| slower than eager: PyTorch kept | - | - | - |" in render_markdown(older)


def test_geometric_means_are_over_verified_problems_per_category():
    summary = suite.summarize(SYNTHETIC, speed_measured=True)
    assert summary["single_op"]["geomean_speedup_vs_eager"] == pytest.approx(1.0)  # (2 * 0.5 * 1) ** (1/3)
    assert summary["single_op"]["geomean_speedup_vs_compile"] == pytest.approx((0.5 * 0.25 * 1.0) ** (1 / 3))
    assert summary["fusion"]["geomean_speedup_vs_eager"] == pytest.approx(4.0)
    assert summary["all"]["geomean_speedup_vs_eager"] == pytest.approx(math.prod([2.0, 0.5, 1.0, 4.0]) ** 0.25)


def test_call_latency_speedups_have_their_own_geometric_means_and_are_absent_from_older_runs():
    records = [
        record("single_op/a.py", "single_op", vs_eager=2.0, vs_compile=2.0, latency=(0.5, 1.0)),
        record("single_op/b.py", "single_op", vs_eager=2.0, vs_compile=2.0, latency=(2.0, 4.0)),
    ]
    group = suite.summarize(records, speed_measured=True)["single_op"]
    assert group["geomean_speedup_vs_eager"] == pytest.approx(2.0)
    assert group["geomean_latency_speedup_vs_eager"] == pytest.approx(1.0)
    assert group["geomean_latency_speedup_vs_compile"] == pytest.approx(2.0)
    older = suite.summarize([record("single_op/a.py", "single_op", vs_eager=2.0, vs_compile=2.0)], speed_measured=True)
    assert older["single_op"]["geomean_latency_speedup_vs_compile"] is None
    markdown = render_markdown(gpu_results(records))
    assert "| geomean call-latency speedup vs torch.compile | 2.00x | 2.00x |" in markdown


def test_speeds_use_device_time_and_latency_its_own_measure_unless_work_escaped_the_timed_stream():
    measured = {
        "eager": {"median_ms": 1.0, "median_latency_ms": 1.2, "median_host_ms": 1.3},
        "compile": {"median_ms": 0.8, "median_latency_ms": 1.6, "median_host_ms": 1.7},
        "triton": {"median_ms": 0.5, "median_latency_ms": 0.8, "median_host_ms": 3.0},
    }
    device_time = benchmark.speedups(measured, "median_ms")
    assert (device_time["triton_ms"], device_time["speedup_vs_eager"], device_time["speedup_vs_compile"]) == (0.5, 2.0, 1.6)
    latency = benchmark.speedups(measured, "median_latency_ms")
    assert latency["speedup_vs_eager"] == pytest.approx(1.5) and latency["speedup_vs_compile"] == pytest.approx(2.0)
    # the host clock is the candidate's only trusted measure; baselines keep their synchronized event times
    host = benchmark.speedups(measured, "median_host_ms")
    assert host["triton_ms"] == 3.0 and host["eager_ms"] == 1.2 and host["compile_ms"] == 1.6
    assert benchmark.speedups({**measured, "compile": None}, "median_ms")["speedup_vs_compile"] is None


def test_max_autotune_is_timed_beside_the_default_mode_only_when_asked_for():
    measured = {
        "eager": {"median_ms": 1.0}, "compile": {"median_ms": 0.8}, "compile_max_autotune": {"median_ms": 0.6},
        "triton": {"median_ms": 0.5},
    }
    both = benchmark.speedups(measured, "median_ms")
    assert both["compile_max_autotune_ms"] == 0.6 and both["speedup_vs_compile_max_autotune"] == pytest.approx(1.2)
    assert both["speedup_vs_compile"] == pytest.approx(1.6)
    default_only = benchmark.speedups({name: measured[name] for name in ("eager", "compile", "triton")}, "median_ms")
    assert default_only["compile_max_autotune_ms"] is None and default_only["speedup_vs_compile_max_autotune"] is None


def test_max_autotune_has_its_own_fast_1_and_geometric_mean_and_older_runs_have_none():
    records = [
        record("fusion/a.py", "fusion", vs_eager=2.0, vs_compile=1.5, vs_max_autotune=0.5),
        record("fusion/b.py", "fusion", vs_eager=2.0, vs_compile=1.5, vs_max_autotune=2.0),
        record("fusion/broken.py", "fusion", status="failed"),
    ]
    group = suite.summarize(records, speed_measured=True)["fusion"]
    assert group["geomean_speedup_vs_compile_max_autotune"] == pytest.approx(1.0)
    assert group["fast_1_vs_compile_max_autotune"] == pytest.approx(1 / 3)
    older = suite.summarize(SYNTHETIC, speed_measured=True)["all"]
    assert older["fast_1_vs_compile_max_autotune"] is None and older["geomean_speedup_vs_compile_max_autotune"] is None


def test_the_markdown_shows_max_autotune_columns_and_rows_only_for_a_run_that_timed_it():
    records = [record("fusion/a.py", "fusion", vs_eager=2.0, vs_compile=1.5, vs_max_autotune=0.5)]
    results = gpu_results(records)
    results["pipeline"] = {**PIPELINE, "max_autotune": True}
    markdown = render_markdown(results)
    assert "torch.compile timed in its default mode and in mode max-autotune" in markdown
    assert "| geomean speedup vs torch.compile max-autotune | 0.50x | 0.50x |" in markdown
    assert "| max-autotune ms | Triton ms | vs eager | vs compile | vs max-autotune |" in markdown
    assert "| fusion/a.py | fusion | float32 | verified | 1 | 1 | 0.25 | 0.5 | 2.00x | 1.50x | 0.50x |" in markdown
    assert "max-autotune" not in render_markdown(gpu_results(records))
    assert "· 1.50x vs torch.compile · 0.50x vs max-autotune ·" in progress_line(1, 1, records[0])


def test_bench_max_autotune_is_off_by_default_and_asked_of_every_benchmark_job_when_on(tmp_path):
    from drtriton_lsp.cli import bench_options, bench_pipeline, build_parser
    from drtriton_lsp.engine.pipeline import benchmark_params
    from drtriton_lsp.task import Task

    task = Task(name="Model", kind="module", source=TINY_PROBLEM)
    default_args = build_parser().parse_args(["bench", "problems", "--search"])
    assert bench_pipeline(default_args) == PIPELINE  # runs from before the option resume as they were
    assert benchmark_params(task, "source", bench_options(default_args, "cuda"))["max_autotune"] is False
    tuned_args = build_parser().parse_args(["bench", "problems", "--search", "--max-autotune"])
    tuned = bench_pipeline(tuned_args)
    assert tuned == {**PIPELINE, "max_autotune": True}
    assert benchmark_params(task, "source", bench_options(tuned_args, "cuda"))["max_autotune"] is True
    path = tmp_path / "results.json"
    path.write_text(json.dumps(gpu_results(SYNTHETIC)))
    with pytest.raises(DrtritonError, match="was run with"):
        suite.load_results(path, H200, tuned)


def test_a_torch_compile_failure_is_left_out_of_the_mean_and_counts_as_not_faster():
    records = [
        record("fusion/a.py", "fusion", vs_eager=2.0, vs_compile=3.0),
        record("fusion/b.py", "fusion", vs_eager=2.0, vs_compile=None),
    ]
    group = suite.summarize(records, speed_measured=True)["fusion"]
    assert group["geomean_speedup_vs_compile"] == pytest.approx(3.0)
    assert group["fast_1_vs_compile"] == 0.5


def test_ceiling_shares_split_memory_bound_from_matmul_class_against_their_targets():
    overall = suite.summarize(SYNTHETIC, speed_measured=True)["all"]
    assert overall["memory_bound"] == {"problems": 3, "median_fraction": 0.8, "at_target": 1, "target": 0.85}
    assert overall["matmul_class"] == {"problems": 1, "median_fraction": 0.75, "at_target": 1, "target": 0.70}


def test_without_a_gpu_nothing_claims_a_speed():
    cpu_records = [record("single_op/relu.py", "single_op"), record("fusion/x.py", "fusion", status="failed")]
    overall = suite.summarize(cpu_records, speed_measured=False)["all"]
    assert overall["verified"] == 1
    assert overall["fast_1_vs_eager"] is None and overall["fast_1_vs_compile"] is None
    assert overall["geomean_speedup_vs_eager"] is None


def test_roofline_position_divides_bytes_by_time_and_uses_the_library_ceiling_for_matmuls():
    work = GraphWork(
        minimum_bytes=4_000_000_000, matmul_class=True, matmuls=(MatmulShape(1, 1024, 1024, 1024, "float16"),),
        matmul_flops=2 * 1024**3,
    )
    timing = {"triton_ms": 2.0, "compile_ms": 4.0}
    position = suite.roofline_position(timing, work, {"gb_per_s": 4000.0}, {"ms": 1.5, "tflops": 1.43, "tf32": False})
    assert position["triton_gb_per_s"] == pytest.approx(2000.0)  # 4 GB in 2 ms
    assert position["bandwidth_fraction"] == pytest.approx(0.5)
    assert position["flop_fraction"] == pytest.approx(0.75)  # the library needs 1.5 ms for the same FLOPs
    assert position["compile_flop_fraction"] == pytest.approx(0.375)
    assert position["ceiling"] == "library" and position["fraction"] == position["flop_fraction"]


def symbolic_linear_graph() -> OpGraph:
    """x[s0, 64] (float16) -> linear(64 -> 32, bias) -> relu; s0 was 128 at capture."""
    return OpGraph(
        inputs=[
            GraphInput("w", "parameter", "fc.weight", TensorSpec((32, 64), "float16")),
            GraphInput("b", "parameter", "fc.bias", TensorSpec((32,), "float16")),
            GraphInput("x", "user_input", "x", TensorSpec(("s0", 64), "float16")),
        ],
        nodes=[
            OpNode("linear", "aten.linear.default", ({"ref": "x"}, {"ref": "w"}, {"ref": "b"}), {}, (TensorSpec(("s0", 32), "float16"),)),
            OpNode("relu", "aten.relu.default", ({"ref": "linear"},), {}, (TensorSpec(("s0", 32), "float16"),)),
        ],
        outputs=[{"ref": "relu"}],
        returns_tuple=False,
        symbol_hints={"s0": 128},
    )


def test_bytes_and_flops_of_a_small_graph_come_from_its_captured_sizes():
    work = graph_work(symbolic_linear_graph())
    inputs = (32 * 64 + 32 + 128 * 64) * 2
    output = 128 * 32 * 2
    assert work.minimum_bytes == inputs + output
    assert work.matmul_class
    assert work.matmuls == (MatmulShape(1, 128, 32, 64, "float16"),)
    assert work.matmul_flops == 2 * 128 * 32 * 64


def test_a_graph_without_matmuls_is_memory_bound_and_an_unknown_size_gives_no_bytes():
    graph = symbolic_linear_graph()
    graph.nodes = graph.nodes[1:]
    graph.nodes[0] = OpNode("relu", "aten.relu.default", ({"ref": "x"},), {}, (TensorSpec(("s0", 64), "float16"),))
    assert graph_work(graph).matmul_class is False
    graph.symbol_hints = {}
    assert graph_work(graph).minimum_bytes is None


def test_matmul_shapes_follow_torch_matmul_broadcasting_and_einsum_letters():
    assert broadcast_matmul_shape((8, 1, 16, 32), (4, 32, 24), "float32") == MatmulShape(32, 16, 24, 32, "float32")
    assert broadcast_matmul_shape((32,), (32, 24), "float32") == MatmulShape(1, 1, 24, 32, "float32")
    assert einsum_shape("bij,bjk->bik", (4, 16, 32), (4, 32, 8), "bfloat16") == MatmulShape(4, 16, 8, 32, "bfloat16")
    assert einsum_shape("bhqd,bhkd->bhqk", (2, 3, 5, 7), (2, 3, 11, 7), "float16") == MatmulShape(6, 5, 11, 7, "float16")


def test_a_timed_matmul_problem_is_placed_against_the_library_measured_for_its_own_shapes(tmp_path, monkeypatch):
    asked = []

    def worker_call(_runner, method, params, **_options):
        asked.append((method, params))
        if method == "capture":
            return {"graph": symbolic_linear_graph().to_json()}
        return {"copy": None, "matmul": {"ms": 0.5, "flops": 2 * 128 * 32 * 64, "tflops": 0.001, "tf32": False}}

    def optimize(source, path, target, *, options, session):
        session.runner.call("capture", {"task": "..."})
        report = {
            "status": "verified", "message": "", "timing_note": "", "correctness": {"reason": None},
            "replaced_ops": ["aten.linear.default", "aten.relu.default"], "kept_ops": [],
            "timing": {"eager_ms": 2.0, "compile_ms": 1.5, "triton_ms": 1.0, "speedup_vs_eager": 2.0,
                       "speedup_vs_compile": 1.5, "flags": []},
        }
        return suite.Outcome(report)

    monkeypatch.setattr(suite.LocalRunner, "call", worker_call)
    monkeypatch.setattr(suite, "optimize_target", optimize)
    problem_file = tmp_path / "linear_relu.py"
    problem_file.write_text("# stands in for a problem file\n")
    problem = suite.Problem(problem_file, "linear_relu.py", "fusion")
    entry = suite.run_problem(problem, None, {"gb_per_s": 1.0}, lambda _message: None)
    assert [method for method, _ in asked] == ["capture", "ceilings"]
    assert asked[1][1] == {"matmuls": [{"batch": 1, "m": 128, "n": 32, "k": 64, "dtype": "float16"}], "tf32": False}
    assert entry["status"] == "verified" and entry["dtypes"] == ["float16"]
    assert entry["roofline"]["ceiling"] == "library"
    assert entry["roofline"]["fraction"] == pytest.approx(0.5)  # the library takes 0.5 ms, Triton 1 ms
    assert entry["roofline"]["compile_fraction"] == pytest.approx(0.5 / 1.5)


def test_problems_are_found_by_form_and_categorised_by_constant_then_folder(tmp_path):
    body = "class Model:\n    pass\n\ndef get_inputs():\n    return []\n\ndef get_init_inputs():\n    return []\n"
    (tmp_path / "fusion").mkdir()
    (tmp_path / "fusion" / "declared.py").write_text('CATEGORY = "single-op"\n' + body)
    (tmp_path / "fusion" / "by_folder.py").write_text(body)
    (tmp_path / "loose.py").write_text(body)
    (tmp_path / "helper.py").write_text("def get_inputs():\n    return []\n")
    problems, skipped = suite.find_problems(tmp_path)
    categories = {problem.name: problem.category for problem in problems}
    assert categories == {"fusion/by_folder.py": "fusion", "fusion/declared.py": "single_op", "loose.py": "uncategorized"}
    assert skipped == ["helper.py"]
    chosen, _ = suite.select_problems(tmp_path, "fusion/", 1)
    assert [problem.name for problem in chosen] == ["fusion/by_folder.py"]
    with pytest.raises(DrtritonError, match="no problem"):
        suite.select_problems(tmp_path, "nothing-like-this", None)


def test_the_speedup_chart_is_valid_svg_with_one_log_scale_bar_per_problem():
    timed = [r for r in SYNTHETIC if r["timing"]]
    root = ElementTree.fromstring(speedup_chart(timed, "speedups"))
    bars = [rect for rect in root.iter(f"{SVG}rect") if rect.get("class") == "bar"]
    assert len(bars) == len(timed)
    titles = [bar.find(f"{SVG}title").text for bar in bars]
    assert titles[0].startswith("single_op/softmax.py: 0.25x")  # sorted, slowest first
    heights = {title.split(":")[0]: float(bar.get("height")) for title, bar in zip(titles, bars)}
    # on a log scale 2x up is as tall as 2x down (0.5x)
    assert heights["fusion/bias_gelu.py"] == pytest.approx(heights["single_op/relu.py"], abs=0.2)


def test_the_roofline_chart_draws_each_timed_problem_and_the_targets_it_is_held_to():
    root = ElementTree.fromstring(roofline_chart(SYNTHETIC, "ceilings"))
    bars = [rect for rect in root.iter(f"{SVG}rect") if rect.get("class") == "bar"]
    assert len(bars) == 4
    texts = [text.text for text in root.iter(f"{SVG}text")]
    assert "target 85%" in texts and "target 70%" in texts
    assert any("1 problem(s) not drawn" in (text or "") for text in texts)


def test_the_speedup_chart_colours_the_models_suite_categories_and_lists_only_those_drawn():
    timed = [
        record("models/conv_bn_relu.py", "cnn", vs_eager=2.0, vs_compile=0.5),
        record("models/gru_cell.py", "rnn", vs_eager=1.0, vs_compile=1.5),
        record("models/mystery.py", "mystery", vs_eager=1.0, vs_compile=1.2),
    ]
    root = ElementTree.fromstring(speedup_chart(timed, "speedups"))
    fills = {
        bar.find(f"{SVG}title").text.split(":")[0]: bar.get("fill")
        for bar in root.iter(f"{SVG}rect")
        if bar.get("class") == "bar"
    }
    assert len(set(fills.values())) == 3  # cnn, rnn and the grey of an unknown category
    legend = [text.text for text in root.iter(f"{SVG}text") if text.get("y") == "41"]
    assert legend == ["cnn", "rnn", "other"]


def test_charts_without_timings_say_that_no_speed_was_measured():
    root = ElementTree.fromstring(speedup_chart([record("single_op/relu.py", "single_op")], "speedups"))
    assert not [rect for rect in root.iter(f"{SVG}rect") if rect.get("class") == "bar"]
    assert any("no speed measured" in (text.text or "") for text in root.iter(f"{SVG}text"))


def test_markdown_starts_with_provenance_and_the_summary_table():
    markdown = render_markdown(gpu_results(SYNTHETIC))
    for line in (
        "# drtriton bench: NVIDIA H200",
        "- command: `drtriton bench benchmarks/problems --device cuda`",
        "- commit: 0123abc",
        "- device: cuda (NVIDIA H200)",
        "- versions: python 3.12.3, torch 2.11.0, triton 3.6.0, CUDA 13.0",
        "- pipeline: drtriton optimize's, 5 verification trials, test-time search, 60 s per problem",
        "- date: ",
        "| | single-op | fusion | all |",
        "| fast_1 vs torch.compile | 0% (0/3) | 50% (1/2) | 20% (1/5) |",
        "| geomean speedup vs eager | 1.00x | 4.00x | 1.41x |",
        "| matmul-class at >= 70% | 1/1 | - | 1/1 |",
        "- fusion/broken.py: failed (mismatch): outputs differ at index 3",
    ):
        assert line in markdown, line
    assert "4295 GB/s" in markdown
    assert markdown.index("## Summary") < markdown.index("## Problems")


def test_markdown_on_the_cpu_says_no_speed_was_measured_and_shows_no_speed_rows():
    results = gpu_results([record("single_op/relu.py", "single_op")])
    results["device"] = {"kind": "cpu-interpreter", "name": "Some CPU"}
    results["summary"] = suite.summarize(results["problems"], speed_measured=False)
    markdown = render_markdown(results)
    assert "**no speed was measured**" in markdown
    assert "fast_1" not in markdown and "not measured (no GPU)" in markdown


def test_resuming_refuses_results_from_another_device_or_pipeline_setting(tmp_path):
    path = tmp_path / "results.json"
    path.write_text(json.dumps(gpu_results(SYNTHETIC)))
    assert len(suite.load_results(path, H200, PIPELINE)["problems"]) == 5
    with pytest.raises(DrtritonError, match="measured on cuda"):
        suite.load_results(path, {"kind": "cpu-interpreter", "name": "Some CPU"}, PIPELINE)
    with pytest.raises(DrtritonError, match="was run with"):
        suite.load_results(path, H200, {**PIPELINE, "search": False, "search_seconds": None})


class LostConnectionRunner:
    """A remote runner whose ssh connection is gone: every job fails as the ssh runner's do."""

    host = "ssh://gpu-box"

    def __init__(self) -> None:
        self.closed = False

    def call(self, method, params, **_options):
        raise JobFailure("connection_lost", f"the ssh connection to {self.host} failed", hint="check that ssh works")

    def close(self) -> None:
        self.closed = True


def test_a_problems_jobs_run_on_the_runner_made_for_it_and_a_lost_connection_is_recorded_with_what_to_check(tmp_path):
    problem_file = tmp_path / "scale.py"
    problem_file.write_text(
        "import torch\nimport torch.nn as nn\n\n\nclass Model(nn.Module):\n    def forward(self, x):\n"
        "        return x * 2.0\n\n\ndef get_inputs():\n    return [torch.randn(8)]\n\n\n"
        "def get_init_inputs():\n    return []\n"
    )
    made: list[LostConnectionRunner] = []

    def new_runner() -> LostConnectionRunner:
        made.append(LostConnectionRunner())
        return made[-1]

    problem = suite.Problem(problem_file, "scale.py", "fusion")
    entry = suite.run_problem(
        problem, OptimizeOptions(device="cpu"), None, lambda _message: None, new_runner=new_runner
    )
    assert len(made) == 1 and made[0].closed
    assert entry["status"] == "error" and entry["reason"] == "drtriton_error"
    expected = "the capture worker failed: the ssh connection to ssh://gpu-box failed (check that ssh works)"
    assert entry["message"] == expected


def test_ctrl_c_stops_the_run_and_keeps_the_problems_already_done(tmp_path, monkeypatch):
    problems = [suite.Problem(tmp_path / f"{name}.py", f"{name}.py", "fusion") for name in ("a", "b", "c")]

    def run_problem(problem, _options, _copy, _progress, cancel=None, new_runner=None, gpu_memory=None):
        if problem.name == "b.py":
            raise KeyboardInterrupt
        return record(problem.name, "fusion", vs_eager=2.0, vs_compile=1.5, fraction=0.9)

    monkeypatch.setattr(suite, "run_problem", run_problem)
    results = gpu_results([])
    finished = suite.run_suite(
        problems, results, None, None,
        save=lambda document: write_results(document, tmp_path / "out"),
        on_progress=lambda *_: None, on_done=lambda *_: None, places=one_place(),
    )
    saved = json.loads((tmp_path / "out" / "results.json").read_text())
    assert finished is False and saved["complete"] is False
    assert [r["problem"] for r in saved["problems"]] == ["a.py"]
    assert "1 problems run (partial" in (tmp_path / "out" / "results.md").read_text()

    ran = []
    monkeypatch.setattr(
        suite, "run_problem", lambda problem, *_, **__: ran.append(problem.name) or record(problem.name, "fusion")
    )
    assert suite.run_suite(
        problems, saved, None, None, save=lambda _: None, on_progress=lambda *_: None, on_done=lambda *_: None,
        places=one_place(),
    )
    assert ran == ["b.py", "c.py"]  # a resumed run skips what is recorded


def test_problems_run_side_by_side_on_one_gpu_share_its_lock_and_its_memory(tmp_path, monkeypatch):
    problems = [suite.Problem(tmp_path / f"{name}.py", f"{name}.py", "fusion") for name in ("a", "b", "c", "d")]
    running, most_at_once, environments, rooms = set(), [0], [], set()
    guard = threading.Lock()
    pair = threading.Barrier(2, timeout=30)  # two problems meet here only when they run side by side

    def run_problem(problem, _options, _copy, _progress, cancel=None, new_runner=None, gpu_memory=None):
        with guard:
            running.add(problem.name)
            most_at_once[0] = max(most_at_once[0], len(running))
            environments.append(new_runner().extra_env)
            rooms.add(gpu_memory)
        try:
            pair.wait()
        except threading.BrokenBarrierError:
            pass  # run one at a time: the count below says so
        with guard:
            running.discard(problem.name)
        return record(problem.name, "fusion", vs_eager=2.0, vs_compile=1.5)

    monkeypatch.setattr(suite, "run_problem", run_problem)
    monkeypatch.delenv(GPU_LOCK_VARIABLE, raising=False)
    done = []
    results = gpu_results([])
    with local_places(lambda env: LocalRunner(extra_env=env), jobs=2, gpu_memory_bytes=141 * 1024**3) as places:
        assert suite.run_suite(
            problems, results, None, None, save=lambda _: None, on_progress=lambda *_: None,
            on_done=lambda number, total, _record: done.append((number, total)), places=places,
        )
        (lock,) = {environment[GPU_LOCK_VARIABLE] for environment in environments}
        assert os.path.isdir(os.path.dirname(lock))
    assert most_at_once[0] == 2 and all("CUDA_VISIBLE_DEVICES" not in env for env in environments)
    assert not os.path.exists(os.path.dirname(lock))  # the lock's folder is gone with the run
    # one account of the GPU's memory, shared by every problem run side by side
    (room,) = rooms
    assert room is not None and room.capacity == int(141 * 1024**3 * USABLE_SHARE)
    assert GPU_LOCK_VARIABLE not in os.environ
    assert sorted(r["problem"] for r in results["problems"]) == ["a.py", "b.py", "c.py", "d.py"]
    assert all("placed_on" not in r for r in results["problems"])  # one place: nothing to say
    assert done == [(1, 4), (2, 4), (3, 4), (4, 4)] and results["complete"]
    assert results["placement"] == {"gpus": 1, "jobs_per_gpu": 2}


def one_place():
    """This host's single place, without locks (as `drtriton bench` with --jobs 1 and --gpus 1)."""
    return LocalPlaces([GpuSlot(None, {}, None)], 1, lambda env: LocalRunner(extra_env=env))


def test_a_timing_waits_for_running_verifications_and_holds_the_gpu_alone(tmp_path, monkeypatch):
    lock_path = tmp_path / "gpu.lock"
    monkeypatch.setenv(GPU_LOCK_VARIABLE, str(lock_path))
    events = []
    verifying, late_started = threading.Event(), threading.Event()

    def verification():
        with gpu_hold(exclusive=False):
            events.append("verify start")
            verifying.set()
            late_started.wait(timeout=10)
            events.append("verify end")

    def timing():
        verifying.wait()
        with gpu_hold(exclusive=True):
            events.append("timing start")
            time.sleep(0.1)
            events.append("timing end")

    threads = [threading.Thread(target=verification), threading.Thread(target=timing)]
    for thread in threads:
        thread.start()
    verifying.wait()
    wait_until_the_turnstile_is_held(lock_path)  # the timing is waiting now: a later verification queues behind it
    late = threading.Thread(target=lambda: gpu_hold_then(events, "late verify"))
    late.start()
    late_started.set()
    for thread in [*threads, late]:
        thread.join(timeout=10)
    assert events == ["verify start", "verify end", "timing start", "timing end", "late verify"]


def wait_until_the_turnstile_is_held(lock_path, timeout_s=10.0):
    """Return once another holder has the lock's turnstile (a waiting exclusive hold keeps it)."""
    import fcntl

    deadline = time.monotonic() + timeout_s
    with open(str(lock_path) + ".turnstile", "a") as probe:
        while time.monotonic() < deadline:
            try:
                fcntl.flock(probe, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return
            fcntl.flock(probe, fcntl.LOCK_UN)
            time.sleep(0.01)
    pytest.fail("the timing never waited at the turnstile")


def gpu_hold_then(events, name):
    with gpu_hold(exclusive=False):
        events.append(name)


def test_ctrl_c_during_the_first_problem_still_writes_readable_results(tmp_path, monkeypatch):
    def interrupted(*_arguments, **_options):
        raise KeyboardInterrupt

    monkeypatch.setattr(suite, "run_problem", interrupted)
    problems = [suite.Problem(tmp_path / "a.py", "a.py", "fusion")]
    finished = suite.run_suite(
        problems, gpu_results([]), None, None,
        save=lambda document: write_results(document, tmp_path / "out"),
        on_progress=lambda *_: None, on_done=lambda *_: None, places=one_place(),
    )
    assert finished is False
    assert "| problems | 0 |" in (tmp_path / "out" / "results.md").read_text()
    ElementTree.parse(tmp_path / "out" / "speedup.svg")


@pytest.mark.gpu
def test_the_ceilings_measured_on_a_gpu_are_in_a_plausible_range():
    from drtriton_lsp.worker.ceilings import run_ceilings

    square = {"batch": 1, "m": 4096, "n": 4096, "k": 4096, "dtype": "bfloat16"}
    measured = run_ceilings({"copy": True, "matmuls": [square]}, lambda _message: None)
    assert 100 < measured["copy"]["gb_per_s"] < 20_000
    assert measured["matmul"]["flops"] == 2 * 4096**3
    assert 10 < measured["matmul"]["tflops"] < 5_000


TINY_PROBLEM = '''"""A tiny fused scale-and-ReLU for the end-to-end test."""

import torch
import torch.nn as nn

CATEGORY = "fusion"


class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x * 2.0)


def get_inputs():
    return [torch.randn(8, 32)]


def get_init_inputs():
    return []
'''


@pytest.mark.slow
def test_bench_on_the_cpu_verifies_writes_every_file_and_claims_no_speed(tmp_path):
    problems = tmp_path / "problems"
    problems.mkdir()
    (problems / "scale_relu.py").write_text(TINY_PROBLEM)
    out = tmp_path / "out"
    command = [sys.executable, "-m", "drtriton_lsp.cli", "bench", str(problems), "--device", "cpu", "--out", str(out), "--trials", "2"]
    finished = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr
    said = " ".join(finished.stderr.split())  # the console wraps long lines
    assert "no speed is measured" in said
    assert "[1/1] scale_relu.py: verified · no speed measured" in said
    results = json.loads((out / "results.json").read_text())
    assert results["schema"] == "drtriton.bench/1" and results["complete"]
    (entry,) = results["problems"]
    assert entry["status"] == "verified" and entry["category"] == "fusion" and entry["timing"] is None
    assert entry["work"]["minimum_bytes"] == 2 * 8 * 32 * 4
    assert entry["report"]["correctness"]["interpreter"] is True
    assert "**no speed was measured**" in (out / "results.md").read_text()
    for chart in ("speedup.svg", "roofline.svg"):
        ElementTree.parse(out / chart)

    again = subprocess.run(command + ["--resume"], capture_output=True, text=True, timeout=600)
    assert again.returncode == 0, again.stderr
    said_again = " ".join(again.stderr.split())
    assert "bench: 0 problems" in said_again and "(1 already there)" in said_again
    assert len(json.loads((out / "results.json").read_text())["problems"]) == 1


@pytest.mark.parametrize("command", ["bench", "optimize"])
def test_the_search_cache_folder_is_the_users_choice_and_defaults_to_the_shared_one(tmp_path, command):
    from drtriton_lsp.cli import bench_options, build_parser

    parser = build_parser()
    chosen = parser.parse_args([command, "problems", "--search", "--search-cache", str(tmp_path / "cache")])
    assert chosen.search_cache == tmp_path / "cache"
    assert parser.parse_args([command, "problems", "--search"]).search_cache is None  # ~/.cache/drtriton/search
    if command == "bench":
        assert bench_options(chosen, "cuda").search_cache == tmp_path / "cache"
