"""The inlay hint's verdict in brief: the verdict, plus the speedup over eager only when one was measured."""

from __future__ import annotations

from drtriton_lsp.engine.pipeline import Outcome
from drtriton_lsp.server.inlay_hints import verdict_in_brief
from drtriton_lsp.server.results import TargetResult


def result(status: str = "verified", speedup: float | None = None, error: str = "") -> TargetResult:
    report = {
        "status": status,
        "message": "" if status == "verified" else "the results differ from the reference",
        "timing": {"speedup_vs_eager": speedup, "speedup_vs_compile": speedup / 2} if speedup else None,
        "timing_note": "no GPU",
        "device": {"kind": "cuda" if speedup else "cpu-interpreter", "name": "NVIDIA H200"},
    }
    outcome = None if error else Outcome(report)
    return TargetResult("file:///m.py", "Block", "hash", "text", 1, outcome, error)


def test_the_brief_verdict_keeps_a_measured_speedup_and_drops_the_rest():
    assert verdict_in_brief(result(speedup=2.41)) == "verified · 2.41x vs eager"
    assert verdict_in_brief(result()) == "verified"
    assert verdict_in_brief(result("failed")) == "failed"
    assert verdict_in_brief(result(error="the worker crashed (SIGSEGV)")) == "failed"
