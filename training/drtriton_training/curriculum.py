"""The RL curriculum over CSP-DAG levels: which level prompts come from, advanced when held-out pass@1 at the current
level reaches a threshold; its state saved beside each checkpoint, and the sampler that reads it.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Iterator

import torch
from torch.utils.data import Sampler

CURRICULUM_FILE = "curriculum.json"


@dataclass
class Curriculum:
    """Levels in order, the index of the current one, the pass@1 that advances, and every measurement taken."""

    levels: tuple[int, ...]
    threshold: float
    index: int = 0
    history: list[dict[str, Any]] = field(default_factory=list)

    @property
    def level(self) -> int:
        return self.levels[self.index]

    def last_pass_at_1(self) -> float | None:
        """pass@1 of the latest measurement at the current level (None before one)."""
        at_level = [entry for entry in self.history if entry["level"] == self.level]
        return at_level[-1]["pass@1"] if at_level else None

    def record(self, step: int, pass_at_1: float | None, valid_share: float | None) -> bool:
        """Record a measurement at the current level; advance (True) when it reaches the threshold and a harder
        level is left. A level whose programs could not be judged (pass@1 None) never advances."""
        advance = pass_at_1 is not None and pass_at_1 >= self.threshold and self.index + 1 < len(self.levels)
        self.history.append({
            "step": step, "level": self.level, "pass@1": pass_at_1, "valid_share": valid_share,
            "advanced_to": self.levels[self.index + 1] if advance else None,
        })
        if advance:
            self.index += 1
        return advance

    def save(self, directory: Path) -> None:
        (directory / CURRICULUM_FILE).write_text(json.dumps(asdict(self), indent=1) + "\n")

    @classmethod
    def load(cls, directory: Path) -> Curriculum:
        state = json.loads((directory / CURRICULUM_FILE).read_text())
        return cls(tuple(state["levels"]), state["threshold"], state["index"], state["history"])


class CurriculumSampler(Sampler[int]):
    """trl's RepeatSampler drawing each batch from the curriculum's current level: `batch_size` distinct prompts of
    the level (cycled, reshuffled at each pass), each repeated `mini_repeat_count` times (a group), the whole batch
    `repeat_count` times. The level is read as each batch is drawn, so an advance applies from the next batch the
    data loader draws (it fetches one ahead)."""

    def __init__(
        self, indices_by_level: dict[int, list[int]], curriculum: Curriculum, *, mini_repeat_count: int,
        batch_size: int, repeat_count: int, batches_per_epoch: int, seed: int,
    ):
        self.indices_by_level = indices_by_level
        self.curriculum = curriculum
        self.mini_repeat_count = mini_repeat_count
        self.batch_size = batch_size
        self.repeat_count = repeat_count
        self.batches_per_epoch = batches_per_epoch
        self.seed = seed
        self.queues: dict[int, list[int]] = {}
        self.generators: dict[int, torch.Generator] = {}

    def _next_prompt(self, level: int) -> int:
        queue = self.queues.setdefault(level, [])
        if not queue:
            generator = self.generators.setdefault(level, torch.Generator().manual_seed(self.seed * 1000 + level))
            indices = self.indices_by_level[level]
            queue.extend(indices[i] for i in torch.randperm(len(indices), generator=generator).tolist())
        return queue.pop(0)

    def __iter__(self) -> Iterator[int]:
        for _ in range(self.batches_per_epoch):
            level = self.curriculum.level
            chunk = [self._next_prompt(level) for _ in range(self.batch_size)]
            for _ in range(self.repeat_count):
                for index in chunk:
                    for _ in range(self.mini_repeat_count):
                        yield index

    def __len__(self) -> int:
        return self.batches_per_epoch * self.batch_size * self.repeat_count * self.mini_repeat_count
