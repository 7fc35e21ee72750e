"""What `drtriton bench` writes: results.json, results.md (provenance, summary, per-problem table) and two SVG charts.

Everything is rendered from the results document alone, so a partial run (Ctrl-C) and a finished
one are written the same way, after every problem.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from drtriton_lsp.bench.suite import category_rank, slower_than_eager
from drtriton_lsp.bench.suite_plots import roofline_chart, speedup_chart

SPEEDUP_CHART = "speedup.svg"
ROOFLINE_CHART = "roofline.svg"
CATEGORY_TITLES = {"single_op": "single-op", "fusion": "fusion", "all": "all"}
NO_SPEED = "not measured (no GPU)"


def write_results(results: dict[str, Any], directory: Path) -> None:
    """Write the four files into `directory`, each through a temporary file and a rename."""
    directory.mkdir(parents=True, exist_ok=True)
    device = device_title(results)
    files = {
        "results.json": json.dumps(results, indent=1) + "\n",
        "results.md": render_markdown(results),
        SPEEDUP_CHART: speedup_chart(results["problems"], f"Triton speedup vs torch.compile, {device}"),
        ROOFLINE_CHART: roofline_chart(results["problems"], f"Fraction of the ceiling reached, {device}"),
    }
    for name, text in files.items():
        temporary = directory / f".{name}.tmp"
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, directory / name)


def device_title(results: dict[str, Any]) -> str:
    device = results["device"]
    return device["name"] if device["kind"] == "cuda" else "CPU, Triton interpreter"


def speed_measured(results: dict[str, Any]) -> bool:
    return results["device"]["kind"] == "cuda"


def render_markdown(results: dict[str, Any]) -> str:
    versions = results["versions"]
    device = results["device"]
    problems = results["problems"]
    lines = [
        f"# drtriton bench: {device_title(results)}",
        "",
        f"- command: `{results['command']}`",
        f"- commit: {results['commit']}",
        f"- device: {device['kind']} ({device['name']})",
        f"- versions: python {versions.get('python')}, torch {versions.get('torch')}, "
        f"triton {versions.get('triton')}, CUDA {versions.get('cuda')}",
        f"- date: {results['started']}"
        + (f" (last problem {results['updated']})" if results["updated"] != results["started"] else ""),
        f"- suite: {results['suite']}: {len(problems)} problems run"
        + ("" if results["complete"] else " (partial: interrupted or still to resume with --resume)"),
        f"- pipeline: {pipeline_text(results['pipeline'])}",
    ]
    if results["pipeline"].get("model"):
        lines.append(f"- {model_winners_text(problems)}")
    if speed_measured(results):
        lines += provenance_of_ceilings(results)
    else:
        lines.append(
            "- **no speed was measured**: without a GPU every problem is verified under the Triton "
            "interpreter at reduced sizes, which says nothing about speed"
        )
    lines += ["", "## Summary", "", *render_summary_table(results), ""]
    if speed_measured(results):
        lines += [
            "fast_1 is KernelBench's fast_p at p = 1: the share of all problems that are verified and faster "
            "(failures count as not faster). Geometric means are over verified problems.",
            "",
            f"![speedup vs torch.compile]({SPEEDUP_CHART})",
            "",
            f"![fraction of the ceiling]({ROOFLINE_CHART})",
            "",
        ]
    lines += ["## Problems", "", *render_problem_table(results)]
    not_verified = [record for record in problems if record["status"] != "verified"]
    if not_verified:
        lines += ["", "## Not verified", ""]
        lines += [
            f"- {record['problem']}: {verdict(record)}" + (f": {one_line(record['message'])}" if record["message"] else "")
            for record in not_verified
        ]
    kept = slower_than_eager(problems)
    if kept:
        lines += ["", "## Slower than eager: PyTorch kept", "",
                  "Verified, but timed slower than eager PyTorch: `drtriton optimize` does not write these kernels back, "
                  "so the user's code keeps PyTorch's speed (1.00x vs eager). The speedups above are the kernels' own.", ""]
        lines += [f"- {record['problem']}: {record['timing']['speedup_vs_eager']:.2f}x vs eager" for record in kept]
    flagged = [record for record in problems if record["timing"] and record["timing"].get("flags")]
    if flagged:
        lines += ["", "## Flags raised by the benchmark", ""]
        lines += [f"- {record['problem']}: {', '.join(record['timing']['flags'])}" for record in flagged]
    if results["skipped_files"]:
        lines += ["", f"Skipped (not KernelBench form): {', '.join(results['skipped_files'])}"]
    return "\n".join(lines) + "\n"


def model_winners_text(problems: list[dict[str, Any]]) -> str:
    """How many verified problems' kept kernels a model wrote, and how many candidates each source gave."""
    searches = [(record.get("report") or {}).get("search") or {} for record in problems]
    won = sum((search.get("winner") or {}).get("source") == "model" for search in searches)
    verified = sum(record["status"] == "verified" for record in problems)
    given = {
        source: sum(search.get("candidates_by_source", {}).get(source, 0) for search in searches)
        for source in ("compiler", "model")
    }
    return (
        f"model: {won} of {verified} verified problems kept a model's kernel; candidates: {given['compiler']} from the "
        f"compiler, {given['model']} from the model"
    )


def pipeline_text(pipeline: dict[str, Any]) -> str:
    search = (
        f"test-time search, {pipeline['search_seconds']:g} s per problem"
        if pipeline["search"]
        else "the compiler's default schedule (no search)"
    )
    baselines = "; torch.compile timed in its default mode and in mode max-autotune" if pipeline.get("max_autotune") else ""
    return f"drtriton optimize's, {pipeline['trials']} verification trials, {search}{baselines}"


def max_autotune_timed(results: dict[str, Any]) -> bool:
    """Whether the run also timed torch.compile in mode max-autotune (`drtriton bench --max-autotune`)."""
    return bool(results["pipeline"].get("max_autotune"))


def provenance_of_ceilings(results: dict[str, Any]) -> list[str]:
    copies = results["copy_bandwidth"]
    copy_text = ", ".join(f"{measure['gb_per_s']:.0f} GB/s ({measure['measured']})" for measure in copies) or "-"
    return [
        f"- ceilings: copy bandwidth {copy_text}: a 1 GiB device-to-device copy, bytes read plus bytes written "
        "over the median time, measured at the start of each run; a problem's bandwidth is its inputs "
        "(parameters included) read once plus its outputs written once, over Triton's median time",
        "- matmul-class problems (an mm, bmm, addmm, baddbmm, linear, matmul or einsum in the graph): "
        "2*M*N*K summed, against torch.matmul timed on the same shapes and dtypes in the same run "
        "(TF32 off for float32 unless the kernel itself uses TF32)",
        "- timing: CUDA events, L2 flushed before each call, warm-up, medians. Speeds are device time (calls "
        "queued back to back, as triton.testing.do_bench times); call latency is each call issued to an idle GPU, "
        "host launch included (see a report's timing.method)",
    ]


def render_summary_table(results: dict[str, Any]) -> list[str]:
    summary = results["summary"]
    columns = list(summary)
    measured = speed_measured(results)
    header = "| | " + " | ".join(CATEGORY_TITLES.get(name, name) for name in columns) + " |"
    lines = [header, "|---" * (len(columns) + 1) + "|"]

    def row(label: str, cell) -> None:
        lines.append(f"| {label} | " + " | ".join(cell(summary[name]) for name in columns) + " |")

    row("problems", lambda group: str(group["problems"]))
    row("verified", lambda group: f"{group['verified']} ({percent(group['verified'], group['problems'])})")
    if not measured:
        row("speed", lambda _group: NO_SPEED)
        return lines
    row("fast_1 vs eager", lambda group: share(group["fast_1_vs_eager"], group["problems"]))
    row("fast_1 vs torch.compile", lambda group: share(group["fast_1_vs_compile"], group["problems"]))
    row("slower than eager: PyTorch kept", lambda group: pytorch_kept_cell(group))
    row("geomean speedup vs eager", lambda group: times(group["geomean_speedup_vs_eager"]))
    row("geomean speedup vs torch.compile", lambda group: times(group["geomean_speedup_vs_compile"]))
    if max_autotune_timed(results):
        row("fast_1 vs torch.compile max-autotune", lambda group: share(group["fast_1_vs_compile_max_autotune"], group["problems"]))
        row("geomean speedup vs torch.compile max-autotune", lambda group: times(group["geomean_speedup_vs_compile_max_autotune"]))
    row("geomean call-latency speedup vs eager", lambda group: times(group.get("geomean_latency_speedup_vs_eager")))
    row("geomean call-latency speedup vs torch.compile", lambda group: times(group.get("geomean_latency_speedup_vs_compile")))
    row("memory-bound: median of copy bandwidth", lambda group: median_cell(group["memory_bound"]))
    row(f"memory-bound at >= {target_of(summary, 'memory_bound')}", lambda group: at_target(group["memory_bound"]))
    row("matmul-class: median of library rate", lambda group: median_cell(group["matmul_class"]))
    row(f"matmul-class at >= {target_of(summary, 'matmul_class')}", lambda group: at_target(group["matmul_class"]))
    return lines


def pytorch_kept_cell(group: dict[str, Any]) -> str:
    """Verified problems whose kernel is slower than eager, of those timed ("-" in results from before the count)."""
    if "pytorch_kept" not in group:
        return "-"
    return f"{group['pytorch_kept']} of {group['timed']}"


def render_problem_table(results: dict[str, Any]) -> list[str]:
    tuned = max_autotune_timed(results)
    header = (
        "| problem | category | dtype | status | eager ms | compile ms "
        + ("| max-autotune ms " if tuned else "")
        + "| Triton ms | vs eager | vs compile "
        + ("| vs max-autotune " if tuned else "")
        + "| latency vs eager | latency vs compile "
        "| MB moved | Triton GB/s | of copy BW | Triton TFLOP/s | of library | ops in Triton / kept | seconds |"
    )
    lines = [header, "|---" * (20 if tuned else 18) + "|"]
    ordered = sorted(results["problems"], key=lambda record: (category_rank(record["category"]), record["problem"]))
    for record in ordered:
        timing = record["timing"] or {}
        latency = timing.get("latency") or {}
        position = record["roofline"] or {}
        work = record["work"] or {}
        cells = [
            record["problem"],
            CATEGORY_TITLES.get(record["category"], record["category"]),
            ", ".join(record["dtypes"]) or "-",
            verdict(record),
            number(timing.get("eager_ms")),
            number(timing.get("compile_ms")),
            *([number(timing.get("compile_max_autotune_ms"))] if tuned else []),
            number(timing.get("triton_ms")),
            times(timing.get("speedup_vs_eager")),
            times(timing.get("speedup_vs_compile")),
            *([times(timing.get("speedup_vs_compile_max_autotune"))] if tuned else []),
            times(latency.get("speedup_vs_eager")),
            times(latency.get("speedup_vs_compile")),
            number(work["minimum_bytes"] / 1e6 if work.get("minimum_bytes") else None),
            number(position.get("triton_gb_per_s"), digits=0),
            fraction(position.get("bandwidth_fraction")),
            number(position.get("triton_tflops")),
            fraction(position.get("flop_fraction")),
            f"{len(record['replaced_ops'])} / {len(record['kept_ops'])}",
            f"{record['seconds']:.0f}",
        ]
        lines.append("| " + " | ".join(cell.replace("|", "/") for cell in cells) + " |")
    return lines


def progress_line(number: int, total: int, record: dict[str, Any]) -> str:
    """E.g. "[ 3/24] fusion/bias_gelu.py: verified · 1.52x vs eager · 1.21x vs torch.compile · 88% of copy BW · 41 s"."""
    parts = [verdict(record)]
    timing = record["timing"]
    if timing:
        parts.append(f"{timing['speedup_vs_eager']:.2f}x vs eager")
        parts.append(f"{times(timing['speedup_vs_compile'])} vs torch.compile")
        if timing.get("speedup_vs_compile_max_autotune"):
            parts.append(f"{times(timing['speedup_vs_compile_max_autotune'])} vs max-autotune")
        position = record["roofline"] or {}
        if position.get("fraction") is not None:
            ceiling = "copy BW" if position["ceiling"] == "copy" else "library matmul"
            parts.append(f"{position['fraction']:.0%} of {ceiling}")
    elif record["status"] == "verified":
        parts.append("no speed measured")
    elif record["message"]:
        parts.append(one_line(record["message"], 160))
    parts.append(f"{record['seconds']:.0f} s")
    width = len(str(total))
    return f"[{number:>{width}}/{total}] {record['problem']}: " + " · ".join(parts)


def verdict(record: dict[str, Any]) -> str:
    """The status, with the rejection reason when it says more, e.g. "failed (mismatch)"."""
    reason = record["reason"]
    return record["status"] + (f" ({reason})" if reason and reason != record["status"] else "")


def render_console_summary(results: dict[str, Any]) -> str:
    """The summary table alone, for the terminal."""
    return "\n".join(render_summary_table(results)) + "\n"


def target_of(summary: dict[str, Any], key: str) -> str:
    return fraction(summary["all"][key]["target"])


def median_cell(ceiling: dict[str, Any]) -> str:
    if not ceiling["problems"]:
        return "-"
    return f"{fraction(ceiling['median_fraction'])} (of {ceiling['problems']})"


def at_target(ceiling: dict[str, Any]) -> str:
    return f"{ceiling['at_target']}/{ceiling['problems']}" if ceiling["problems"] else "-"


def share(value: float | None, total: int) -> str:
    if value is None:
        return "-"
    return f"{value:.0%} ({round(value * total)}/{total})"


def percent(part: int, whole: int) -> str:
    return f"{part / whole:.0%}" if whole else "-"


def fraction(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def times(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def number(value: float | None, digits: int = 4) -> str:
    if value is None:
        return "-"
    return f"{value:.0f}" if digits == 0 else f"{value:.{digits}g}"


def one_line(text: str, limit: int = 300) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."
