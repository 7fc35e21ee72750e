"""Synthesis of datasets: CSP-DAG programs, seeded, deduplicated by canonical hash, generated in parallel.

Program i of level k under base seed S always gets the same seed, whatever the worker count; the held-out
benchmark sets (programs.py) are regenerated from their fixed seed here and excluded from training data.
"""

from __future__ import annotations

import multiprocessing
from functools import lru_cache
from typing import Iterable, Iterator

from rich.progress import Progress

from drtriton_training.csp_dag import ProgramSynthesizer
from drtriton_training.emit import program_metadata, render_program
from drtriton_training.programs import HELDOUT_COUNT, HELDOUT_SEED, SyntheticProgram, heldout_hashes, program_seed
from drtriton_training.shapes import SynthesisLimits


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
