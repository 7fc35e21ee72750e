"""Finished jobs' results, kept per document and target, valid only while the target's text is unchanged.

A result also remembers the exact document text and version its generate job read, which write-back needs;
verify and benchmark jobs replace its outcome and keep the rest.
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
    """What a generate job produced for one target (its outcome as verify and benchmark jobs last updated it).

    outcome: the engine's outcome (report, program), or None when the job failed before a report.
    error: the one-line reason when there is no report (bad input, a crashed worker); hint: what to do about it.
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
    # for a failure: what to do about it, and the line it names, counted from the target's `class`/`def` line (so
    # it follows the target when lines above it change)
    hint: str = ""
    problem_offset: int | None = None

    @property
    def report(self) -> dict[str, Any] | None:
        return self.outcome.report if self.outcome is not None else None

    @property
    def applicable(self) -> bool:
        """Verified, and measured faster than eager PyTorch or not timed at all (no GPU)."""
        return self.report is not None and worth_writing_back(self.report)

    def refusal_to(self, kind: str) -> str:
        """Why a "verify" or "benchmark" job cannot run on this result's kernel ("" when it can); runs no code."""
        if self.outcome is None:
            return f"the last Generate failed ({self.error}), so there is no kernel to {kind}; run Generate again"
        # The pipeline imports torch; the job that made this outcome imported it already.
        from drtriton_lsp.engine.pipeline import retime_refusal, reverify_refusal

        return reverify_refusal(self.outcome) if kind == "verify" else retime_refusal(self.outcome)


class ResultStore:
    """Results by (document URI, target name); a result whose target text changed is never handed out."""

    def __init__(self) -> None:
        self._results: dict[tuple[str, str], TargetResult] = {}
        self._outdated: set[tuple[str, str]] = set()  # dropped because their target's text changed
        self._applied: set[tuple[str, str]] = set()  # written into the file by drtriton.apply

    def put(self, result: TargetResult) -> None:
        key = (result.uri, result.target_name)
        self._results[key] = result
        self._outdated.discard(key)
        self._applied.discard(key)

    def mark_applied(self, result: TargetResult) -> None:
        """The result's kernel was written into the file: the target's text changes, and that is why."""
        self._applied.add((result.uri, result.target_name))

    def outdated_by(self, analysis: DocumentAnalysis, target_name: str) -> str | None:
        """Why the target has no current result though it had one: "applied" (drtriton wrote the kernel into it)
        or "edited"; None when it never had one, or its result is current."""
        key = (analysis.uri, target_name)
        result = self._results.get(key)
        analyzed = analysis.target_named(target_name)
        changed = result is not None and analyzed is not None and analyzed.text_hash not in (None, result.text_hash)
        if key not in self._outdated and not changed:
            return None
        return "applied" if key in self._applied else "edited"

    def current(self, analysis: DocumentAnalysis, target_name: str) -> TargetResult | None:
        """The result for the target's text in `analysis`; None when there is none, or the text differs or is
        not known (an edit the analysis has not caught up with), or a syntax error or rename hides the target."""
        result = self._results.get((analysis.uri, target_name))
        analyzed = analysis.target_named(target_name)
        if result is None or analyzed is None or analyzed.text_hash != result.text_hash:
            return None
        return result

    def drop_stale(self, analysis: DocumentAnalysis) -> list[str]:
        """Forget the results whose target's text changed, by a complete analysis; the targets' names."""
        dropped = []
        for (uri, target_name), result in list(self._results.items()):
            analyzed = analysis.target_named(target_name) if uri == analysis.uri else None
            if analyzed is not None and not analyzed.edited_since_analysis and analyzed.text_hash != result.text_hash:
                del self._results[(uri, target_name)]
                self._outdated.add((uri, target_name))
                dropped.append(target_name)
        return dropped

    def for_document(self, analysis: DocumentAnalysis) -> list[TargetResult]:
        found = (self.current(analysis, analyzed.target.name) for analyzed in analysis.targets)
        return [result for result in found if result is not None]

    def documents(self) -> list[str]:
        return sorted({uri for uri, _ in self._results})
