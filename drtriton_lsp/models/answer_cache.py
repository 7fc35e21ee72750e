"""A local checkpoint's answers kept on disk, so that asking it the same thing again costs nothing: a repeated Generate,
a resumed bench, a refinement turn whose feedback did not change. Answers are verified and timed afresh on every use.
"""

from __future__ import annotations

import hashlib
import json
import threading
from dataclasses import asdict
from pathlib import Path

from drtriton_lsp.models.backends import ModelBackend, Sampling
from drtriton_lsp.models.script_grammar import ScriptConstraint

# Part of every key: a change in what a cached answer means (its format, the request's fields) starts afresh.
ANSWER_CACHE_VERSION = 1
# The folder of the search cache (`--search-cache`; the server uses the default) where the answers are kept.
ANSWERS_FOLDER = "model-answers"


class CachingBackend:
    """`backend` with its answers kept per request in `directory` (a JSON file named by the hash of everything the
    answers depend on: backend, checkpoint hash, prompts, sampling and constraints). Only a backend that hashes its
    checkpoint is worth it and safe to key (a local checkpoint: transformers, vllm); a server's weights can change
    under the same name, and it answers quickly anyway. `answered_from_cache` counts the requests it answered."""

    def __init__(self, backend: ModelBackend, directory: Path):
        self.backend, self.directory = backend, directory
        self.name, self.model, self.checkpoint = backend.name, backend.model, backend.checkpoint
        self.answered_from_cache = 0

    @property
    def unconstrained(self) -> str:
        return self.backend.unconstrained

    def problem(self) -> str:
        return self.backend.problem()

    def complete(
        self, prompts: list[str], sampling: Sampling, cancel: threading.Event | None = None,
        constraints: list[ScriptConstraint | None] | None = None,
    ) -> list[list[str]]:
        path = self.directory / f"{self.key(prompts, sampling, constraints)}.json"
        try:
            answers = json.loads(path.read_text())
        except (OSError, ValueError):
            answers = None
        if _well_formed(answers, len(prompts), sampling.samples):
            self.answered_from_cache += 1
            return answers
        answers = self.backend.complete(prompts, sampling, cancel, constraints=constraints)
        self.directory.mkdir(parents=True, exist_ok=True)
        temporary = path.with_name(f".{path.name}.tmp")
        temporary.write_text(json.dumps(answers))
        temporary.replace(path)
        return answers

    def key(self, prompts: list[str], sampling: Sampling, constraints: list[ScriptConstraint | None] | None) -> str:
        request = {
            "version": ANSWER_CACHE_VERSION, "backend": self.name, "checkpoint": self.checkpoint, "prompts": prompts,
            "sampling": asdict(sampling),
            "constraints": [constraint.to_json() if constraint else None for constraint in constraints or []],
        }
        return hashlib.sha256(json.dumps(request, sort_keys=True).encode()).hexdigest()[:32]


def _well_formed(answers, prompts: int, samples: int) -> bool:
    """Whether a cached document is what `complete` returns for this request (a damaged file is asked again)."""
    return (
        isinstance(answers, list) and len(answers) == prompts
        and all(isinstance(texts, list) and len(texts) == samples and all(isinstance(t, str) for t in texts)
                for texts in answers)
    )
