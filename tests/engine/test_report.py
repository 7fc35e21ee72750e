"""The report's views: the one-line summary never claims speed it did not measure, latency reads plainly, and only a
verified winner (faster than eager, or untimed) is worth writing back.
"""

from __future__ import annotations

import dataclasses
import re
from xml.etree import ElementTree

from drtriton_lsp.engine.report import (
    ModelSearchEntry,
    ScheduleSearchEntry,
    SearchSection,
    Winner,
    build_report,
    latency_text,
    one_line,
    to_markdown,
    worth_writing_back,
)
from drtriton_lsp.engine.report_chart import timing_chart
from drtriton_lsp.engine.verify import Verdict
from drtriton_lsp.models.sources import COMPILER, COMPILER_ORIGIN, MODEL, Origin


def report(status: str = "verified", speedup: float | None = None) -> dict:
    timing = None
    if speedup is not None:
        timing = {"speedup_vs_eager": speedup, "speedup_vs_compile": speedup / 2}
    return {
        "target": "Block",
        "status": status,
        "message": "" if status == "verified" else "the results differ from the reference",
        "timing": timing,
        "timing_note": "no GPU",
        "device": {"kind": "cuda" if timing else "cpu-interpreter", "name": "NVIDIA H200" if timing else "AMD EPYC"},
    }


def test_one_line_states_measured_speedups_or_says_none_were_measured():
    assert one_line(report(speedup=2.0)) == "Block: verified · 2.00x vs eager · 1.00x vs torch.compile · NVIDIA H200"
    assert one_line(report()) == "Block: verified · no speed measured: no GPU"
    assert one_line(report("failed")) == "Block: failed · the results differ from the reference"


def test_only_a_verified_winner_is_worth_writing_back():
    assert worth_writing_back(report())
    assert worth_writing_back(report(speedup=1.3))
    assert not worth_writing_back(report(speedup=0.35))
    assert not worth_writing_back(report("failed"))


def test_call_latency_reads_as_times_and_speedups_and_leaves_out_a_failed_torch_compile():
    latency = {"eager_ms": 0.045, "compile_ms": 0.0785, "triton_ms": 0.0634, "speedup_vs_eager": 0.71, "speedup_vs_compile": 1.24}
    assert latency_text(latency) == (
        "eager 0.045 ms, torch.compile 0.0785 ms, Triton 0.0634 ms (0.71x vs eager, 1.24x vs torch.compile)"
    )
    without_compile = {**latency, "compile_ms": None, "speedup_vs_compile": None}
    assert latency_text(without_compile) == "eager 0.045 ms, Triton 0.0634 ms (0.71x vs eager)"


def test_the_markdown_report_says_when_the_sizes_were_fixed_at_capture():
    note = "torch.export could not leave the input sizes free (TypeError: ...); captured at the example sizes"
    search = SearchSection(backend="compiler", candidates=0, verified=0, seconds=None, capture_note=note)
    built = build_report(
        file="model.py", target="Block", status="no_candidate", device={"kind": "cpu", "name": "CPU"}, verdict=None,
        timing=None, timing_note="nothing was generated", search=search, kernel_source=None, schedule=None,
        replaced_ops=[], kept_ops=[],
    )
    assert f"| capture | {note} |" in to_markdown(built)


def test_the_markdown_report_says_what_the_search_kept_and_when_its_budget_cut_it_short():
    def with_search(search: SearchSection) -> str:
        return to_markdown(build_report(
            file="model.py", target="Block", status="verified", device={"kind": "cuda", "name": "NVIDIA H200"},
            verdict=None, timing=None, timing_note="", search=search, kernel_source=None, schedule=None,
            replaced_ops=[], kept_ops=[],
        ))

    finished = SearchSection(
        backend="compiler+search", candidates=14, verified=11, seconds=None,
        schedule_search=ScheduleSearchEntry(cached=False, stopped="", fragments=[{}, {}], kept="searched"),
    )
    assert "| search | kept the searched schedule; 14 candidates, 11 verified, over 2 fragments |" in with_search(finished)
    cut = dataclasses.replace(
        finished, stages_s={"search": 5.4},
        schedule_search=ScheduleSearchEntry(cached=False, stopped="budget", fragments=[{}], kept="default"),
    )
    assert (
        "| search | kept the default schedule; 14 candidates, 11 verified, over 1 fragment; stopped at its time or "
        "candidate budget after 5.4 s |"
    ) in with_search(cut)
    not_searched = SearchSection(
        backend="compiler", candidates=1, verified=1, seconds=None, note="not searched: ... there is no GPU"
    )
    assert "| search |" not in with_search(not_searched)


def test_the_search_section_writes_each_step_that_ran_and_leaves_out_the_steps_that_did_not():
    def reported(search: SearchSection | None) -> dict:
        return build_report(
            file="model.py", target="Block", status="verified", device={"kind": "cuda", "name": "NVIDIA H200"},
            verdict=None, timing=None, timing_note="", search=search, kernel_source=None, schedule=None,
            replaced_ops=[], kept_ops=[],
        )["search"]

    assert reported(None) == {}  # a kernel read from the file: no search ran in this session
    external = SearchSection(backend="external", candidates=1, verified=0, seconds=None)
    assert reported(external) == {"backend": "external", "candidates": 1, "verified": 0, "seconds": None}

    # filled in as optimize_target does: the compiler's kernel verified, a schedule search, then a model that wins
    search = SearchSection(
        backend="compiler", candidates=1, verified=0, seconds=0.0, stages_s={"capture": 1.5}, capture_note="",
        candidates_by_source={COMPILER: 1},
    )
    search.verified, search.first_verified_s, search.winner = 1, 2.25, Winner(COMPILER_ORIGIN)
    search.backend = "compiler+search"
    search.candidates += 3
    search.verified += 2
    fragment = {"ops": ["aten.mm"], "chosen": "mm(block=64)", "pytorch_ms": 0.2, "chosen_ms": 0.1}
    search.schedule_search = ScheduleSearchEntry(
        cached=False, stopped="budget", fragments=[fragment], kept="default", end_to_end_ms=(0.5, None)
    )
    search.candidates_by_source[COMPILER] = search.candidates
    search.backend += "+model"
    search.model = ModelSearchEntry(
        backend="openai", model="qwen", checkpoint="", kind="kernel", samples=2, turns=0, constrained=True,
        unconstrained="", answers=2, verified=1, rejections=[{"reason": "malformed answer: no end line", "count": 1}],
        stopped="", problem="", seconds=3.5,
    )
    search.candidates += 2
    search.verified += 1
    search.candidates_by_source[MODEL] = 2
    search.winner = Winner(Origin(MODEL, "kernel", "openai", "qwen", sample=1, turn=0), ms=0.25, compiler_ms=0.5)
    search.seconds = 9.75
    assert reported(search) == {
        "backend": "compiler+search+model", "candidates": 6, "verified": 4, "seconds": 9.75,
        "stages_s": {"capture": 1.5}, "capture_note": "", "candidates_by_source": {"compiler": 4, "model": 2},
        "first_verified_s": 2.25,
        "winner": {"source": "model", "kind": "kernel", "backend": "openai", "model": "qwen", "sample": 1, "turn": 0},
        "winner_ms": 0.25, "compiler_ms": 0.5,
        "cached": False, "stopped": "budget", "fragments": [fragment], "kept": "default",
        "default_ms": 0.5, "searched_ms": None,  # the searched program ran but was not timed: null, not absent
        "model": {
            "backend": "openai", "model": "qwen", "checkpoint": "", "kind": "kernel", "samples": 2, "turns": 0,
            "constrained": True, "unconstrained": "", "answers": 2, "verified": 1,
            "rejections": [{"reason": "malformed answer: no end line", "count": 1}], "stopped": "", "problem": "",
            "seconds": 3.5,
        },
    }
    assert "note" not in reported(search)

    # the compiler's kernel kept, a search that found nothing new, and a model backend that could not be opened
    search.winner = Winner(COMPILER_ORIGIN)
    search.schedule_search = ScheduleSearchEntry(cached=True, stopped="", fragments=[], kept="default")
    search.model = ModelSearchEntry.unopened("openai", "the model server did not answer")
    written = reported(search)
    assert written["winner"] == {"source": "compiler"}
    assert written["model"] == {
        "backend": "openai", "stopped": "unavailable", "problem": "the model server did not answer"
    }
    for absent in ("winner_ms", "compiler_ms", "default_ms", "searched_ms", "note"):
        assert absent not in written

    cpu = SearchSection(
        backend="compiler", candidates=1, verified=1, seconds=1.0, winner=Winner(COMPILER_ORIGIN),
        note="not searched: no GPU",
    )
    assert reported(cpu) == {
        "backend": "compiler", "candidates": 1, "verified": 1, "seconds": 1.0, "winner": {"source": "compiler"},
        "note": "not searched: no GPU",
    }


def test_the_markdown_report_shows_max_autotune_beside_torch_compile_when_it_was_timed():
    timing = {
        "eager_ms": 2.0, "compile_ms": 1.0, "compile_max_autotune_ms": 0.8, "triton_ms": 0.5, "speedup_vs_eager": 4.0,
        "speedup_vs_compile": 2.0, "speedup_vs_compile_max_autotune": 1.6, "method": "CUDA events",
    }
    built = build_report(
        file="model.py", target="Block", status="verified", device={"kind": "cuda", "name": "NVIDIA H200"},
        verdict=None, timing=timing, timing_note="", search=None, kernel_source=None, schedule=None, replaced_ops=[],
        kept_ops=[],
    )
    markdown = to_markdown(built)
    assert "| torch.compile (max-autotune) | 0.8 ms |" in markdown
    assert "| speedup vs torch.compile (max-autotune) | 1.60x |" in markdown
    untuned = {**timing, "compile_max_autotune_ms": None, "speedup_vs_compile_max_autotune": None}
    assert "max-autotune" not in to_markdown({**built, "timing": untuned})


def test_the_markdown_report_says_where_the_verification_time_went():
    verdict = Verdict(True, None, "", trials=6, passed=6, seconds={"candidate load": 0.9, "primary trials": 0.62})
    built = build_report(
        file="model.py", target="Block", status="verified", device={"kind": "cpu", "name": "CPU"}, verdict=verdict,
        timing=None, timing_note="no GPU", search=None, kernel_source=None, schedule=None, replaced_ops=[], kept_ops=[],
    )
    assert built["correctness"]["seconds"] == {"candidate load": 0.9, "primary trials": 0.62}
    assert "| verification time | 1.52 s: candidate load 0.90 s, primary trials 0.62 s |" in to_markdown(built)


def test_the_timing_chart_draws_one_bar_per_contender_and_none_without_timing():
    timing = {"eager_ms": 2.0, "compile_ms": 1.0, "compile_max_autotune_ms": None, "triton_ms": 0.5}
    timed = {"target": "Block", "device": {"name": "NVIDIA H200"}, "timing": timing}
    chart = timing_chart(timed)
    ElementTree.fromstring(chart)  # well-formed SVG
    assert re.findall(r"<title>([^<]*)</title>", chart) == ["eager: 2 ms", "torch.compile: 1 ms", "Triton: 0.5 ms"]
    widths = [float(width) for width in re.findall(r'class="bar" x="\d+" y="\d+" width="([\d.]+)"', chart)]
    assert widths[0] == 2 * widths[1] == 4 * widths[2]  # lengths in proportion to the times
    assert "2 ms (Triton 4.00x)" in chart and "1 ms (Triton 2.00x)" in chart
    assert "max-autotune" not in chart
    assert "torch.compile (max-autotune)" in timing_chart({**timed, "timing": {**timing, "compile_max_autotune_ms": 0.8}})
    assert timing_chart({**timed, "timing": None}) is None
