"""Run `drtriton optimize` on every example and write a results table (Markdown + JSON).

On a GPU this is the recorded benchmark: eager, torch.compile and Triton timed in one worker run
per example. Usage: python benchmarks/run_examples.py --device cuda --out benchmarks/results
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--out", type=Path, default=REPO / "benchmarks" / "results")
    parser.add_argument("--name", default="examples", help="stem of the result files")
    parser.add_argument("--commit", default=os.environ.get("DRTRITON_COMMIT") or _git_commit())
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)

    reports = []
    with tempfile.TemporaryDirectory() as scratch:
        for example in sorted((REPO / "examples").glob("*.py")):
            copy = Path(scratch) / example.name
            shutil.copy(example, copy)
            report_path = Path(scratch) / f"{example.stem}.json"
            command = [sys.executable, "-m", "drtriton_lsp.cli", "optimize", str(copy), "--device", args.device,
                       "--json", str(report_path), "--write"]
            finished = subprocess.run(command, capture_output=True, text=True)
            print(finished.stderr[-3000:], file=sys.stderr)
            if not report_path.exists():
                reports.append({"target": example.stem, "status": "error", "message": finished.stderr[-500:]})
                continue
            loaded = json.loads(report_path.read_text())
            for report in loaded if isinstance(loaded, list) else [loaded]:
                report["example"] = example.name
                report["written"] = copy.read_text() != example.read_text()
                report["written_file_runs"] = _runs(copy)
                reports.append(report)

    invocation = f"python benchmarks/run_examples.py --device {args.device} --out {args.out.name}"
    (args.out / f"{args.name}.json").write_text(json.dumps(reports, indent=2) + "\n")
    (args.out / f"{args.name}.md").write_text(render(reports, invocation, args.commit))
    print(render(reports, invocation, args.commit))
    return 0 if all(r.get("status") == "verified" for r in reports) else 1


def _runs(path: Path) -> bool:
    """Whether the written-back example still imports (and runs its __main__ block, if any)."""
    finished = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, cwd=path.parent)
    return finished.returncode == 0


def render(reports: list[dict], invocation: str, commit: str) -> str:
    first = next((r for r in reports if r.get("versions")), {})
    versions = first.get("versions", {})
    device = first.get("device", {})
    lines = [
        f"# drtriton examples: {device.get('name', 'unknown device')}",
        "",
        f"- command: `{invocation}`",
        f"- commit: {commit}",
        f"- device: {device.get('kind')} ({device.get('name')})",
        f"- versions: python {versions.get('python')}, torch {versions.get('torch')}, "
        f"triton {versions.get('triton')}, CUDA {versions.get('cuda')}",
        f"- date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}",
        "- timing: medians; see each report's `timing.method`",
        "",
        "| example | target | status | eager ms | compile ms | Triton ms | vs eager | vs compile | max abs err | Triton ops | PyTorch ops | written back | file runs after |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for report in reports:
        timing = report.get("timing") or {}
        correctness = report.get("correctness") or {}
        lines.append(
            "| {example} | {target} | {status} | {eager} | {compile} | {triton} | {vs_eager} | {vs_compile} | {err} | {replaced} | {kept} | {written} | {runs} |".format(
                example=report.get("example", "-"),
                target=report.get("target"),
                status=report.get("status"),
                eager=_fmt(timing.get("eager_ms")),
                compile=_fmt(timing.get("compile_ms")),
                triton=_fmt(timing.get("triton_ms")),
                vs_eager=_fmt(timing.get("speedup_vs_eager"), "x"),
                vs_compile=_fmt(timing.get("speedup_vs_compile"), "x"),
                err=_fmt(correctness.get("max_abs_err")),
                replaced=len(report.get("replaced_ops", [])),
                kept=len(report.get("kept_ops", [])),
                written=report.get("written", "-"),
                runs=report.get("written_file_runs", "-"),
            )
        )
    notes = [f"- {r.get('target')}: {r.get('message') or r.get('timing_note')}" for r in reports if r.get("message") or not r.get("timing")]
    return "\n".join(lines + ([""] + notes if notes else [])) + "\n"


def _fmt(value, unit: str = "") -> str:
    return "-" if value is None else f"{value:.4g}{unit}"


def _git_commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, cwd=REPO, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


if __name__ == "__main__":
    raise SystemExit(main())
