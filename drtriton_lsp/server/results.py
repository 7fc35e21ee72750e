"""Finished jobs' results, kept per document and target, valid only while the target's text is unchanged.

A result also remembers the exact document text and version its job read, which write-back needs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from drtriton_lsp.engine.report import worth_writing_back
from drtriton_lsp.server.analysis import DocumentAnalysis

if TYPE_CHECKING:
    from drtriton_lsp.engine.pipeline import Outcome


@dataclass(frozen=True)
class TargetResult:
    """What a generate job produced for one target.

    outcome: the engine's outcome (report, program), or None when the job failed before a report.
    error: the one-line reason when there is no report (bad input, a crashed worker).
    source_text / source_version: the document as the job read it.
    text_hash: the target's span hash in that text.
    """

    uri: str
    target_name: str
    text_hash: str
    source_text: str
    source_version: int | None
    outcome: Outcome | None
    error: str = ""

    @property
    def report(self) -> dict[str, Any] | None:
        return self.outcome.report if self.outcome is not None else None

    @property
    def applicable(self) -> bool:
        """Verified, and measured faster than eager PyTorch or not timed at all (no GPU)."""
        return self.report is not None and worth_writing_back(self.report)


class ResultStore:
    """Results by (document URI, target name); a lookup against an analysis drops stale ones."""

    def __init__(self) -> None:
        self._results: dict[tuple[str, str], TargetResult] = {}

    def put(self, result: TargetResult) -> None:
        self._results[(result.uri, result.target_name)] = result

    def current(self, analysis: DocumentAnalysis, target_name: str) -> TargetResult | None:
        """The result for the target's current text, or None (a result for older text is discarded)."""
        result = self._results.get((analysis.uri, target_name))
        if result is None:
            return None
        analyzed = analysis.target_named(target_name)
        if analyzed is None:
            return None  # a syntax error or a rename hides the target for now: keep the result
        if analyzed.text_hash != result.text_hash:
            del self._results[(analysis.uri, target_name)]
            return None
        return result

    def for_document(self, analysis: DocumentAnalysis) -> list[TargetResult]:
        found = (self.current(analysis, analyzed.target.name) for analyzed in analysis.targets)
        return [result for result in found if result is not None]

    def documents(self) -> list[str]:
        return sorted({uri for uri, _ in self._results})
