"""Several GPUs against one (issue #20): the same bench on one GPU and on N, their throughput (problems per minute)
and how far each problem's timings moved between the two runs (they should agree within 5 %).

`run DIR --gpus N` runs `drtriton bench DIR --gpus 1`, then `--gpus N`, and compares them; `compare ONE MANY` compares
two bench output folders already there. Writes benchmarks/results/multi-gpu-NAME.md and .json.
"""

from __future__ import annotations

import argparse
import datetime
import json
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
RESULTS_DIR = REPO / "benchmarks" / "results"
RESULTS_SCHEMA = "drtriton.multi-gpu/1"
# The bar: a problem's timing on several GPUs within this share of its timing on one.
AGREEMENT = 0.05
TIMED = ("eager_ms", "compile_ms", "triton_ms")


def bench(directory: Path, gpus: int, out: Path, extra: list[str]) -> float:
    """Run `drtriton bench` on `gpus` GPUs into `out`; its wall seconds."""
    command = [sys.executable, "-m", "drtriton_lsp.cli", "bench", str(directory), "--gpus", str(gpus),
               "--out", str(out), *extra]
    started = time.monotonic()
    subprocess.run(command, check=True)
    return time.monotonic() - started


def run_seconds(results: dict[str, Any]) -> float:
    """A finished bench's wall seconds, from its first to its last save."""
    started = datetime.datetime.fromisoformat(results["started"])
    updated = datetime.datetime.fromisoformat(results["updated"])
    return max((updated - started).total_seconds(), 1.0)


def per_minute(results: dict[str, Any], seconds: float) -> float:
    return 60.0 * len(results["problems"]) / seconds


def timing_changes(one: dict[str, Any], many: dict[str, Any]) -> list[dict[str, Any]]:
    """Per problem timed in both runs: each timing on several GPUs over the same on one (1.0: unchanged)."""
    by_name = {record["problem"]: record for record in one["problems"]}
    changes = []
    for record in many["problems"]:
        alone = by_name.get(record["problem"])
        if not alone or not alone.get("timing") or not record.get("timing"):
            continue
        ratios = {
            key: record["timing"][key] / alone["timing"][key]
            for key in TIMED
            if record["timing"].get(key) and alone["timing"].get(key)
        }
        changes.append({"problem": record["problem"], "placed_on": record.get("placed_on"), "ratios": ratios})
    return changes


def compare(one: dict[str, Any], many: dict[str, Any], one_seconds: float, many_seconds: float) -> dict[str, Any]:
    """The comparison the results file records: throughput, timing agreement per kind of timing, status changes."""
    changes = timing_changes(one, many)
    agreement = {}
    for key in TIMED:
        deviations = [abs(change["ratios"][key] - 1.0) for change in changes if key in change["ratios"]]
        if deviations:
            agreement[key] = {
                "problems": len(deviations),
                "median_deviation": statistics.median(deviations),
                "worst_deviation": max(deviations),
                "share_within": sum(deviation <= AGREEMENT for deviation in deviations) / len(deviations),
            }
    statuses = {record["problem"]: record["status"] for record in one["problems"]}
    moved = [
        {"problem": record["problem"], "one": statuses[record["problem"]], "many": record["status"]}
        for record in many["problems"]
        if record["problem"] in statuses and statuses[record["problem"]] != record["status"]
    ]
    one_rate, many_rate = per_minute(one, one_seconds), per_minute(many, many_seconds)
    return {
        "gpus": many.get("placement", {}).get("gpus"),
        "problems": {"one": len(one["problems"]), "many": len(many["problems"])},
        "seconds": {"one": round(one_seconds, 1), "many": round(many_seconds, 1)},
        "problems_per_minute": {"one": round(one_rate, 2), "many": round(many_rate, 2)},
        "throughput_gain": round(many_rate / one_rate, 2),
        "timing_agreement": agreement,
        "status_changes": moved,
        "changes": changes,
    }


def render(document: dict[str, Any]) -> str:
    """The results file's Markdown."""
    comparison = document["comparison"]
    lines = [
        f"# Bench on {comparison['gpus']} GPUs against one ({document['date']})",
        "",
        f"- command: `{document['command']}`",
        f"- commit: {document['commit']}; GPU: {document['device'].get('name')}; versions: "
        + ", ".join(f"{name} {version}" for name, version in document["versions"].items()),
        f"- runs: one GPU `{document['one']}`, several `{document['many']}`",
        "",
        "| | one GPU | several |",
        "|---|---:|---:|",
        f"| problems | {comparison['problems']['one']} | {comparison['problems']['many']} |",
        f"| wall seconds | {comparison['seconds']['one']} | {comparison['seconds']['many']} |",
        f"| problems per minute | {comparison['problems_per_minute']['one']} | "
        f"{comparison['problems_per_minute']['many']} |",
        "",
        f"Throughput: {comparison['throughput_gain']}x one GPU's.",
        "",
        f"Timings on several GPUs against one (problems timed in both; within {AGREEMENT:.0%} is the bar):",
        "",
        "| timing | problems | median deviation | worst | within 5 % |",
        "|---|---:|---:|---:|---:|",
    ]
    for key, row in comparison["timing_agreement"].items():
        lines.append(
            f"| {key} | {row['problems']} | {row['median_deviation']:.1%} | {row['worst_deviation']:.1%} | "
            f"{row['share_within']:.0%} |"
        )
    if comparison["status_changes"]:
        lines += ["", "Problems whose outcome differed:", ""]
        lines += [f"- {moved['problem']}: {moved['one']} on one GPU, {moved['many']} on several"
                  for moved in comparison["status_changes"]]
    return "\n".join(lines) + "\n"


def write(document: dict[str, Any], name: str, directory: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    (directory / f"multi-gpu-{name}.json").write_text(json.dumps(document, indent=1) + "\n")
    path = directory / f"multi-gpu-{name}.md"
    path.write_text(render(document))
    return path


def document_of(one_dir: Path, many_dir: Path, command: str, seconds: tuple[float, float] | None) -> dict[str, Any]:
    one = json.loads((one_dir / "results.json").read_text())
    many = json.loads((many_dir / "results.json").read_text())
    one_seconds, many_seconds = seconds or (run_seconds(one), run_seconds(many))
    return {
        "schema": RESULTS_SCHEMA,
        "command": command,
        "commit": many["commit"],
        "device": many["device"],
        "versions": many["versions"],
        "date": datetime.date.today().isoformat(),
        "one": str(one_dir),
        "many": str(many_dir),
        "comparison": compare(one, many, one_seconds, many_seconds),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser(
        "run", help="bench DIR on one GPU, then on N, and compare",
        epilog="options after -- go to both benches, e.g. -- --device cuda --search --jobs 2",
    )
    run.add_argument("directory", type=Path)
    run.add_argument("--gpus", type=int, required=True, help="the GPUs of the second run")
    run.add_argument("--out", type=Path, default=Path("multi-gpu-runs"), help="where the two bench folders go")
    run.add_argument("--name", default=datetime.date.today().isoformat(), help="the results file's name")
    existing = commands.add_parser("compare", help="compare two bench output folders already there")
    existing.add_argument("one", type=Path, help="the bench folder of the one-GPU run")
    existing.add_argument("many", type=Path, help="the bench folder of the several-GPU run")
    existing.add_argument("--name", default=datetime.date.today().isoformat(), help="the results file's name")
    for subcommand in (run, existing):
        subcommand.add_argument("--results", type=Path, default=RESULTS_DIR, help="where the results file goes")
    argv = sys.argv[1:] if argv is None else argv
    command = shlex.join(["python", "benchmarks/multi_gpu.py", *argv])
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    arguments = parser.parse_args(argv[: len(argv) - len(extra) - 1] if "--" in argv else argv)
    if arguments.command == "run":
        one_seconds = bench(arguments.directory, 1, arguments.out / "one", extra)
        many_seconds = bench(arguments.directory, arguments.gpus, arguments.out / "many", extra)
        document = document_of(arguments.out / "one", arguments.out / "many", command, (one_seconds, many_seconds))
    else:
        document = document_of(arguments.one, arguments.many, command, None)
    path = write(document, arguments.name, arguments.results)
    print(render(document), end="")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
