"""Datasets of synthetic programs: seeded, deduplicated by canonical hash, generated in parallel.

Program i of level k under base seed S always gets the same seed, whatever the worker count;
the fixed held-out benchmark sets ship with the package and are excluded from training data.
"""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Iterable, Iterator

from rich.progress import Progress

from drtriton_training.csp_dag import ProgramSynthesizer
from drtriton_training.emit import program_metadata, render_program
from drtriton_training.shapes import SynthesisLimits

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


def synthesize_one(job: tuple[int, int, SynthesisLimits]) -> SyntheticProgram:
    level, seed, limits = job
    synthesizer = _synthesizer(limits)
    program = synthesizer.synthesize(level, seed)
    return SyntheticProgram(render_program(program, synthesizer.registry), program_metadata(program, synthesizer.registry))


@lru_cache(maxsize=4)
def _synthesizer(limits: SynthesisLimits) -> ProgramSynthesizer:
    return ProgramSynthesizer(limits=limits)


def synthesize_level(
    level: int,
    count: int,
    base_seed: int,
    *,
    exclude: Iterable[str] = (),
    limits: SynthesisLimits = SynthesisLimits(),
    workers: int = 1,
    progress: Progress | None = None,
) -> list[SyntheticProgram]:
    """`count` distinct programs of `level`, skipping hashes in `exclude` (and duplicates).

    Candidates are taken in index order, so the result is the same for any `workers`.
    """
    seen = set(exclude)
    kept: list[SyntheticProgram] = []
    task = progress.add_task(f"level {level}", total=count) if progress else None
    for program in _candidates(level, base_seed, limits, workers):
        if program.hash in seen:
            continue
        seen.add(program.hash)
        kept.append(program)
        if progress is not None:
            progress.advance(task)
        if len(kept) == count:
            break
    return kept


def _candidates(level: int, base_seed: int, limits: SynthesisLimits, workers: int) -> Iterator[SyntheticProgram]:
    index = 0
    batch = 64 * max(workers, 1)
    pool = multiprocessing.get_context("fork").Pool(workers) if workers > 1 else None
    try:
        while True:
            jobs = [(level, program_seed(base_seed, level, i), limits) for i in range(index, index + batch)]
            index += batch
            results = pool.imap(synthesize_one, jobs, chunksize=4) if pool else map(synthesize_one, jobs)
            yield from results
    finally:
        if pool is not None:
            pool.terminate()


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


def generate_heldout(level: int, workers: int = 1) -> list[SyntheticProgram]:
    """Regenerate a held-out set from its fixed seed (what `scripts/make_heldout.py` ships)."""
    return synthesize_level(level, HELDOUT_COUNT, HELDOUT_SEED, workers=workers)


def synthesize_training(
    levels: Iterable[int], count: int, base_seed: int, *, workers: int = 1, progress: Progress | None = None
) -> list[SyntheticProgram]:
    """Training programs: `count` per level, disjoint by hash from every held-out set."""
    if base_seed == HELDOUT_SEED:
        raise ValueError(f"seed {HELDOUT_SEED} is reserved for the held-out benchmark sets; pick another")
    programs: list[SyntheticProgram] = []
    for level in levels:
        programs += synthesize_level(
            level, count, base_seed, exclude=heldout_hashes(), workers=workers, progress=progress
        )
    return programs
