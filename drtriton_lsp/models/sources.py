"""Candidate sources: the embedded compiler, or a model (which backend, checkpoint, output kind, sample and turn).

Every candidate, whatever its source, goes through the same verifier and benchmark; the report credits its source.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

COMPILER = "compiler"
MODEL = "model"


@dataclass(frozen=True)
class Origin:
    """Where one candidate came from.

    source: "compiler" or "model"; for a model: kind ("kernel": a ModelNew module, "script": a schedule script the
    compiler decodes), backend ("openai", "transformers"), model (its name or checkpoint directory), checkpoint
    (a content hash where the backend can compute one), sample (its index among the turn's answers) and turn
    (0: the first answer; n: after n rounds of feedback).
    """

    source: str
    kind: str = ""
    backend: str = ""
    model: str = ""
    checkpoint: str = ""
    sample: int | None = None
    turn: int | None = None

    def to_json(self) -> dict[str, Any]:
        """The report's spelling: the fields that apply to this source."""
        return {name: value for name, value in asdict(self).items() if value not in ("", None)}

    def describe(self) -> str:
        """One line for progress and Markdown: "compiler", or "model script, sample 2, turn 1 (openai: qwen)"."""
        if self.source == COMPILER:
            return COMPILER
        return f"model {self.kind}, sample {self.sample}, turn {self.turn} ({self.backend}: {self.model})"


COMPILER_ORIGIN = Origin(COMPILER)

