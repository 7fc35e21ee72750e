"""The DRPO-vs-GRPO table of `rl_h200.sh`: `drtriton-train eval` results of several models (RESULTS/NAME.json) per
level, each summarised over the programs that every one of the evaluations reached (an evaluation stopped by its time
limit reaches fewer), so the rows compare the same programs.

    python training/scripts/rl_table.py RESULTS_DIR before after-drpo after-grpo
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from drtriton_training.evaluate import level_summary, table_cell

COLUMNS = ("programs", "valid_share", "pass@1", "pass@k", "timed", "best_of_k_geomean_vs_eager",
           "best_of_k_geomean_vs_compile", "share_faster_than_eager", "share_faster_than_compile")


def table(results: dict[str, dict]) -> str:
    """A Markdown table: a row per model and level, and per model over all levels, on the programs common to all."""
    common = set.intersection(*({record["hash"] for record in document["programs"]} for document in results.values()))
    samples = {document["options"]["samples"] for document in results.values()}
    if len(samples) != 1:
        raise SystemExit(f"the evaluations drew different numbers of samples per program: {sorted(samples)}")
    [k] = samples
    lines = [
        f"Programs every evaluation reached: {len(common)}; k = {k}.",
        "",
        "| model | level | " + " | ".join(column.replace("@k", f"@{k}") for column in COLUMNS) + " |",
        "|---|---|" + "---|" * len(COLUMNS),
    ]
    for name, document in results.items():
        records = [record for record in document["programs"] if record["hash"] in common]
        levels = [str(level) for level in document["options"]["levels"]]
        for level in [*levels, "all"]:
            chosen = [record for record in records if level == "all" or str(record["level"]) == level]
            summary = level_summary(chosen, k)
            summary["pass@k"] = summary.get(f"pass@{k}")
            lines.append(f"| {name} | {level} | " + " | ".join(table_cell(summary.get(c)) for c in COLUMNS) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    directory = Path(argv[1])
    results = {name: json.loads((directory / f"{name}.json").read_text()) for name in argv[2:]}
    print(table(results), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
