"""Regenerate the shipped held-out benchmark sets (100 programs each at levels 1, 2, 5, 20).

Run from the repo root: `.venv/bin/python training/scripts/make_heldout.py`; output is deterministic.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from drtriton_training.dataset import generate_heldout
from drtriton_training.programs import HELDOUT_LEVELS

TARGET = Path(__file__).resolve().parents[1] / "drtriton_training" / "heldout"


def main() -> None:
    TARGET.mkdir(exist_ok=True)
    for level in HELDOUT_LEVELS:
        programs = generate_heldout(level, workers=os.cpu_count() or 1)
        with (TARGET / f"level_{level:02d}.jsonl").open("w") as handle:
            for program in programs:
                handle.write(json.dumps({**program.metadata, "source": program.source}) + "\n")
        print(f"level {level}: {len(programs)} programs")


if __name__ == "__main__":
    main()
