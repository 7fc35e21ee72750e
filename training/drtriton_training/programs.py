"""Synthetic programs as data: the program record, the shipped held-out sets, and the dataset files on disk.

Needs no OR-Tools (only synthesis does, in dataset.py), so evaluation, comparison and RL runs from captured programs
work on a machine without it: the GPU machine lacks the wheel, and the model leaves no room to carry it.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path

HELDOUT_SEED = 20_260_321
HELDOUT_LEVELS = (1, 2, 5, 20)
HELDOUT_COUNT = 100


@dataclass(frozen=True)
class SyntheticProgram:
    """One generated program: its KernelBench-form source and its index record."""

    source: str
    metadata: dict

    @property
    def hash(self) -> str:
        return self.metadata["hash"]


def program_seed(base_seed: int, level: int, index: int) -> int:
    """A stable 63-bit seed for program `index` of `level` under `base_seed`."""
    digest = hashlib.sha256(f"{base_seed}:{level}:{index}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def write_dataset(programs: list[SyntheticProgram], out: Path) -> Path:
    """Write `level_XX/program_NNNNN.py` files and `index.jsonl` (metadata plus file path)."""
    out.mkdir(parents=True, exist_ok=True)
    index_path = out / "index.jsonl"
    counters: dict[int, int] = {}
    with index_path.open("w") as index:
        for program in programs:
            level = program.metadata["level"]
            number = counters.get(level, 0)
            counters[level] = number + 1
            relative = Path(f"level_{level:02d}") / f"program_{number:05d}.py"
            (out / relative).parent.mkdir(parents=True, exist_ok=True)
            (out / relative).write_text(program.source)
            index.write(json.dumps({**program.metadata, "path": str(relative)}) + "\n")
    return index_path


def load_heldout(level: int) -> list[SyntheticProgram]:
    """The shipped held-out benchmark set of one level (100 programs, seed `HELDOUT_SEED`)."""
    text = resources.files("drtriton_training").joinpath(f"heldout/level_{level:02d}.jsonl").read_text()
    programs = []
    for line in text.splitlines():
        record = json.loads(line)
        source = record.pop("source")
        programs.append(SyntheticProgram(source, record))
    return programs


@lru_cache(maxsize=1)
def heldout_hashes() -> frozenset[str]:
    return frozenset(program.hash for level in HELDOUT_LEVELS for program in load_heldout(level))
