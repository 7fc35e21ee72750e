"""The `drtriton.report/1` report: one JSON document per target, rendered as Markdown or one line.

The JSON is the contract (CLI `--json`, the language server's lenses and hovers); the Markdown
table and the one-line summary are views of it, and never claim more than it holds. A report made
by verifying or timing the same kernel again keeps the earlier run in `correctness.previous_run`
or `timing.previous`.
"""

from __future__ import annotations

import datetime
from collections import Counter
from dataclasses import dataclass, field, fields
from typing import Any

from drtriton_lsp.engine.verify import Verdict
from drtriton_lsp.models.sources import MODEL, Origin

# where a user gives a model's part of a search more time (said when its budget ran out)
MODEL_MORE_TIME = "more time: --search-seconds, or drtriton.model.seconds in the editor"

SCHEMA = "drtriton.report/1"


@dataclass(frozen=True)
class KernelSection:
    """The report's `kernel`: the candidate's module source (what was verified and timed), the schedule script it
    was decoded from (None: no candidate, or a module a model wrote), and its float32 precision (None: unknown):
    `triton` ("ieee", "tf32", or "as written" for a model's module) and `tf32_allowed` (the templates the user's
    PyTorch settings let use TF32; PyTorch's own kept ops follow those settings too)."""

    source: str | None
    schedule: str | None
    precision: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "schedule": self.schedule, "precision": self.precision}


@dataclass(frozen=True)
class EarlierRun:
    """The verification a re-verification repeats, as the report's `correctness.previous_run` keeps it."""

    status: str
    trials: int | None
    passed: int | None
    seed: int
    device: dict[str, str]
    created: str

    @classmethod
    def of(cls, report: dict[str, Any]) -> EarlierRun:
        correctness = report["correctness"] or {}
        return cls(
            status=report["status"],
            trials=correctness.get("trials"),
            passed=correctness.get("passed"),
            seed=correctness.get("seed", 0),
            device=report["device"],
            created=report["created"],
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "trials": self.trials,
            "passed": self.passed,
            "seed": self.seed,
            "device": self.device,
            "created": self.created,
        }


@dataclass(frozen=True)
class Correctness:
    """The report's `correctness`: what the verifier's verdict established (see Verdict), and the verification this
    one repeats (None: the first)."""

    verdict: Verdict
    previous_run: EarlierRun | None = None

    def to_json(self) -> dict[str, Any]:
        verdict = self.verdict
        return {
            "trials": verdict.trials,
            "passed": verdict.passed,
            "max_abs_err": verdict.max_abs_err,
            "max_rel_err": verdict.max_rel_err,
            "tolerance": verdict.tolerance,
            "shapes": verdict.shapes,
            "interpreter": verdict.interpreter,
            "reason": verdict.reason,
            "detail": verdict.detail,
            "checks": verdict.checks,
            "seed": verdict.seed,
            "seconds": verdict.seconds,
            "previous_run": self.previous_run.to_json() if self.previous_run else None,
        }


@dataclass(frozen=True)
class Winner:
    """The candidate the job kept, in the report's `search`: its origin (`winner`). A model's kernel wins only once
    timed beside the compiler's verified one, so a model's winner also writes both times (`winner_ms`,
    `compiler_ms`; None: untimed, e.g. no GPU, or no verified compiler kernel to time it against)."""

    origin: Origin
    ms: float | None = None
    compiler_ms: float | None = None

    def to_json(self) -> dict[str, Any]:
        """The search section's entries for the winner."""
        if self.origin.source != MODEL:
            return {"winner": self.origin.to_json()}
        return {"winner": self.origin.to_json(), "winner_ms": self.ms, "compiler_ms": self.compiler_ms}


@dataclass(frozen=True)
class ScheduleSearchEntry:
    """What the schedule search (GPU only) did, in the report's `search`: whether its result came from the search
    cache, why it stopped ("" done, "budget", "cancelled"), per fragment its ops, the schedule chosen and its time
    beside PyTorch's, and which whole program was kept ("default" or "searched").

    end_to_end_ms: (default, searched) whole-program times in ms (None: untimed), written as `default_ms` and
    `searched_ms` once the search found a schedule other than the default and it was verified and timed end to end.
    """

    cached: bool
    stopped: str
    fragments: list[dict[str, Any]]
    kept: str
    end_to_end_ms: tuple[float | None, float | None] | None = None

    def to_json(self) -> dict[str, Any]:
        """The search section's entries for the schedule search."""
        entries = {"cached": self.cached, "stopped": self.stopped, "fragments": self.fragments, "kept": self.kept}
        if self.end_to_end_ms is not None:
            entries["default_ms"], entries["searched_ms"] = self.end_to_end_ms
        return entries


@dataclass(frozen=True, kw_only=True)
class ModelSearchEntry:
    """The report's `search.model`: which model (backend, model: its name or directory, checkpoint: a content hash
    or ""), what it was asked (kind, samples, turns; constrained: answers held to the script grammar while sampled,
    unconstrained: why the backend could not hold them, or ""), what came of its answers (answers, verified,
    rejections: [{reason, count}]), why it stopped ("" done, "budget", "cancelled", "unavailable"), what went wrong ("" none),
    its seconds, and for a local checkpoint how many requests its answer cache answered (cached). A backend that could not be opened has only backend, stopped and problem (see `unopened`): the
    entries left None are left out of the JSON."""

    backend: str
    model: str | None = None
    checkpoint: str | None = None
    kind: str | None = None
    samples: int | None = None
    turns: int | None = None
    constrained: bool | None = None
    unconstrained: str | None = None
    answers: int | None = None
    verified: int | None = None
    rejections: list[dict[str, Any]] | None = None
    stopped: str
    problem: str
    seconds: float | None = None
    cached: int | None = None

    @classmethod
    def unopened(cls, backend: str, problem: str) -> ModelSearchEntry:
        """A backend that could not be opened, and why: it answered nothing."""
        return cls(backend=backend, stopped="unavailable", problem=problem)

    def to_json(self) -> dict[str, Any]:
        values = {entry.name: getattr(self, entry.name) for entry in fields(self)}
        return {name: value for name, value in values.items() if value is not None}


@dataclass(kw_only=True)
class SearchSection:
    """The report's `search`: how the kernel was found, filled in by the pipeline as the job goes.

    backend: what produced the candidates ("compiler", then "+search" and "+model" as those ran; "external": a file
    `drtriton verify` checked); candidates / verified: how many, over every source; seconds: the job's wall time
    (None: not measured). The rest is written only once set (None: left out of the JSON): stages_s: seconds per
    step (StageClock); capture_note: what the capture could not do ("" nothing); candidates_by_source: {source:
    count}; first_verified_s: seconds to the first verified kernel; winner; note: why the schedule search asked
    for did not run; schedule_search; model; replay_choice: the forward timed with and without CUDA-graph replay, and
    which was kept (`replayed_ms`, `plain_ms`, `kept`).
    """

    backend: str
    candidates: int
    verified: int
    seconds: float | None
    stages_s: dict[str, float] | None = None
    capture_note: str | None = None
    candidates_by_source: dict[str, int] | None = None
    first_verified_s: float | None = None
    winner: Winner | None = None
    note: str | None = None
    schedule_search: ScheduleSearchEntry | None = None
    model: ModelSearchEntry | None = None
    replay_choice: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        entries: dict[str, Any] = {
            "backend": self.backend, "candidates": self.candidates, "verified": self.verified, "seconds": self.seconds,
        }
        steps = {
            "stages_s": self.stages_s,
            "capture_note": self.capture_note,
            "candidates_by_source": self.candidates_by_source,
            "first_verified_s": self.first_verified_s,
        }
        entries.update({name: value for name, value in steps.items() if value is not None})
        if self.winner is not None:
            entries.update(self.winner.to_json())
        if self.note is not None:
            entries["note"] = self.note
        if self.schedule_search is not None:
            entries.update(self.schedule_search.to_json())
        if self.model is not None:
            entries["model"] = self.model.to_json()
        if self.replay_choice is not None:
            entries["replay_choice"] = self.replay_choice
        return entries


@dataclass(frozen=True)
class Report:
    """One `drtriton.report/1` report, serialised once by `to_json` (the contract: its keys and their order).

    status: verified | failed | no_candidate | applied | error; `message` says why when not verified.
    search: how the kernel was found; None (written `{}`): no search ran in this session, e.g. for a kernel read
    from the file.
    timing, device, versions: the worker's and the pipeline's JSON, as they are.
    specialization: {guards: [{kind, name, ..., text}], runtime_args: [...]}: the values the kernels were
    generated for, each checked by the written dispatch at every call (any other value runs the original),
    and the scalars passed to the kernels at run time instead; None when nothing was captured.
    """

    file: str | None
    target: str
    status: str
    device: dict[str, str]
    correctness: Correctness | None
    timing: dict[str, Any] | None
    timing_note: str
    search: SearchSection | None
    kernel: KernelSection
    replaced_ops: list[str]
    kept_ops: list[str]
    message: str = ""
    specialization: dict[str, Any] | None = None
    versions: dict[str, str] | None = None
    created: str = field(default_factory=lambda: _now())

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": SCHEMA,
            "file": self.file,
            "target": self.target,
            "status": self.status,
            "message": self.message,
            "device": self.device,
            "correctness": self.correctness.to_json() if self.correctness else None,
            "timing": self.timing,
            "timing_note": self.timing_note,
            "search": self.search.to_json() if self.search is not None else {},
            "kernel": self.kernel.to_json(),
            "replaced_ops": self.replaced_ops,
            "kept_ops": self.kept_ops,
            "specialization": self.specialization,
            "versions": self.versions or {},
            "created": self.created,
        }


def build_report(
    *,
    file: str | None,
    target: str,
    status: str,
    device: dict[str, str],
    verdict: Verdict | None,
    timing: dict[str, Any] | None,
    timing_note: str,
    search: SearchSection | None,
    kernel_source: str | None,
    schedule: str | None,
    replaced_ops: list[str],
    kept_ops: list[str],
    message: str = "",
    versions: dict[str, str] | None = None,
    specialization: dict[str, Any] | None = None,
    precision: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A new report's JSON, dated now (see Report for the entries)."""
    return Report(
        file=file,
        target=target,
        status=status,
        device=device,
        correctness=Correctness(verdict) if verdict is not None else None,
        timing=timing,
        timing_note=timing_note,
        search=search,
        kernel=KernelSection(kernel_source, schedule, precision),
        replaced_ops=replaced_ops,
        kept_ops=kept_ops,
        message=message,
        specialization=specialization,
        versions=versions,
    ).to_json()


def earlier_timing(report: dict[str, Any]) -> dict[str, Any] | None:
    """A report's timing in brief, kept in the timing that replaces it; None when it has none."""
    timing = report["timing"]
    if timing is None:
        return None
    names = ("eager_ms", "compile_ms", "triton_ms", "speedup_vs_eager", "speedup_vs_compile")
    return {**{name: timing[name] for name in names}, "created": report["created"]}


def revised_report(report: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A copy of `report` with some entries replaced, dated now: the same kernel, verified or timed again."""
    return {**report, **changes, "created": _now()}


def _now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def summary(report: dict[str, Any]) -> str:
    """The verdict without the target's name, e.g. "verified · 2.41x vs eager · 1.38x vs torch.compile · H200"."""
    timing = report.get("timing")
    verdict = "verified"
    correctness = report.get("correctness") or {}
    if correctness.get("previous_run"):
        verdict = f"re-verified ({correctness['passed']}/{correctness['trials']} trials, new inputs)"
    if report["status"] == "verified" and timing:
        parts = [verdict, f"{timing['speedup_vs_eager']:.2f}x vs eager"]
        if timing.get("speedup_vs_compile") is not None:
            parts.append(f"{timing['speedup_vs_compile']:.2f}x vs torch.compile")
        return " · ".join([*parts, device_name(report["device"])])
    if report["status"] == "verified":
        reason = "no GPU" if report["device"]["kind"] == "cpu-interpreter" else report["timing_note"]
        return f"{verdict} · no speed measured: {reason}"
    return " · ".join([report["status"], report["message"]] if report.get("message") else [report["status"]])


def device_name(device: dict[str, str]) -> str:
    """E.g. "NVIDIA H200", or "NVIDIA H200 on gpu-box" for a remote host's."""
    return f"{device['name']} on {device['host']}" if device.get("host") else device["name"]


def one_line(report: dict[str, Any]) -> str:
    """E.g. "MLPBlock: verified · 2.41x vs eager · 1.38x vs torch.compile · NVIDIA H200"."""
    return f"{report['target']}: {summary(report)}"


def worth_writing_back(report: dict[str, Any]) -> bool:
    """Verified, and measured faster than eager PyTorch or not timed at all (no GPU): the winner."""
    if report["status"] != "verified":
        return False
    timing = report.get("timing")
    return timing is None or timing["speedup_vs_eager"] >= 1.0


def to_markdown(report: dict[str, Any]) -> str:
    lines = [f"## drtriton report: `{report['target']}`", ""]
    rows: list[tuple[str, str]] = [
        ("status", report["status"] + (f" ({report['message']})" if report.get("message") else "")),
        ("file", str(report.get("file"))),
        ("device", f"{report['device']['kind']} ({device_name(report['device'])})"),
    ]
    capture_note = (report.get("search") or {}).get("capture_note")
    if capture_note:
        rows.append(("capture", capture_note))
    rows += _search_rows(report.get("search") or {})
    rows += _source_rows(report.get("search") or {})
    correctness = report.get("correctness")
    if correctness:
        tolerance = ", ".join(f"{dtype}: atol {t['atol']:g}, rtol {t['rtol']:g}" for dtype, t in correctness["tolerance"].items())
        shapes = Counter(
            f"{s['label']} " + " · ".join("x".join(map(str, shape)) for shape in s["inputs"]) for s in correctness["shapes"]
        )
        rows += [
            ("trials passed", _trials_passed(correctness)),
            ("max abs / rel error", f"{_number(correctness['max_abs_err'])} / {_number(correctness['max_rel_err'])}"),
            ("tolerance", tolerance or "-"),
            ("input shapes", "; ".join(f"{shape} (x{count})" for shape, count in shapes.items()) or "-"),
            ("Triton interpreter", "yes (CPU, reduced sizes)" if correctness["interpreter"] else "no"),
        ]
        # one row per check; the ATen audit is the replaced/kept rows below, the launches per kernel are in the JSON
        rows += [
            (f"check: {name}", _check_text(name, value))
            for name, value in correctness["checks"].items()
            if name not in ("kernels_launched", "aten_audit")
        ]
        if correctness.get("seconds"):
            rows.append(("verification time", _phase_seconds(correctness["seconds"])))
        if correctness.get("previous_run"):
            rows.append(("re-verified", _re_verified(correctness)))
    timing = report.get("timing")
    if timing:
        compile_ms = _number(timing["compile_ms"], " ms")
        rows += [
            ("eager", _number(timing["eager_ms"], " ms")),
            ("torch.compile", compile_ms),
            ("Triton", _number(timing["triton_ms"], " ms")),
            ("speedup vs eager", f"{timing['speedup_vs_eager']:.2f}x"),
            ("speedup vs torch.compile", f"{timing['speedup_vs_compile']:.2f}x" if timing["speedup_vs_compile"] else "-"),
        ]
        if timing.get("compile_max_autotune_ms") is not None:
            tuned = timing["speedup_vs_compile_max_autotune"]
            rows += [
                ("torch.compile (max-autotune)", _number(timing["compile_max_autotune_ms"], " ms")),
                ("speedup vs torch.compile (max-autotune)", f"{tuned:.2f}x" if tuned else "-"),
            ]
        rows.append(("timing method", timing["method"]))
        if timing.get("latency"):
            rows.append(("call latency (idle GPU, launch included)", latency_text(timing["latency"])))
        if timing.get("flags"):
            rows.append(("flags", ", ".join(timing["flags"])))
        if timing.get("replay"):
            replay = timing["replay"]
            rows.append((
                "CUDA-graph replay",
                f"{_number(replay['replayed_ms'], ' ms')} replayed, {_number(replay['plain_ms'], ' ms')} plain",
            ))
        if timing.get("previous"):
            earlier = timing["previous"]
            triton_ms = _number(earlier["triton_ms"], " ms")
            rows.append(("earlier timing", f"{earlier['speedup_vs_eager']:.2f}x vs eager ({triton_ms}), {earlier['created']}"))
    else:
        rows.append(("timing", f"none: {report['timing_note']}"))
    rows += [
        ("replaced ops (Triton)", _ops(report["replaced_ops"])),
        ("kept ops (PyTorch)", _ops(report["kept_ops"])),
    ]
    if correctness and "aten_audit" in correctness["checks"]:
        rows.append(("ops from", "the ATen audit of the verified run (what ran, not what was planned)"))
    precision = report["kernel"].get("precision")
    if precision:
        triton = {"tf32": "TF32", "ieee": "exact float32 (IEEE)"}.get(precision["triton"], precision["triton"])
        allowed = ", ".join(precision["tf32_allowed"]) or "nothing (PyTorch's float32 settings are all exact)"
        rows.append(("precision", f"float32 products in Triton: {triton}; your settings allow TF32 for: {allowed}"))
    guards = (report.get("specialization") or {}).get("guards")
    if guards:
        rows.append(("specialised on (checked at each call)", "; ".join(guard["text"] for guard in guards)))
    lines += ["| | |", "|---|---|"] + [f"| {name} | {value.replace('|', '/')} |" for name, value in rows]
    if report["kernel"].get("schedule"):
        lines += ["", "Schedule:", "", "```", report["kernel"]["schedule"].rstrip(), "```"]
    return "\n".join(lines) + "\n"


def _search_rows(search: dict[str, Any]) -> list[tuple[str, str]]:
    """What the schedule search did, once one ran: which whole program was kept, what was measured, and whether its
    budget or a cancel cut it short."""
    if "kept" not in search:
        return []
    fragments = len(search.get("fragments", []))
    text = (
        f"kept the {search['kept']} schedule; {search['candidates']} candidates, {search['verified']} verified, "
        f"over {fragments} fragment{'s' if fragments != 1 else ''}"
    )
    if search.get("cached"):
        text += " (found in the search cache)"
    if search.get("stopped") == "budget":
        seconds = (search.get("stages_s") or {}).get("search")
        text += "; stopped at its time or candidate budget" + (f" after {seconds:g} s" if seconds else "")
    elif search.get("stopped") == "cancelled":
        text += "; cancelled"
    return [("search", text)]


def _source_rows(search: dict[str, Any]) -> list[tuple[str, str]]:
    """Where the candidates came from and which won, once a model took part (a compiler-only run shows none)."""
    model = search.get("model")
    if model is None:
        return []
    by_source = ", ".join(f"{source} {count}" for source, count in search.get("candidates_by_source", {}).items())
    winner = search.get("winner") or {}
    winning = winner.get("source", "none")
    if winning == "model":
        winning = f"model {winner['kind']}, sample {winner['sample']}, turn {winner['turn']}"
    rows = [("candidates by source", by_source or "-"), ("winner", winning)]
    model_text = f"{model['backend']}: {model.get('model') or '-'}"
    if model.get("problem"):
        model_text += f" (no answer: {model['problem']})"
    elif model.get("stopped") == "budget":
        model_text += f" (stopped: its time ran out; {MODEL_MORE_TIME})"
    elif model.get("stopped"):
        model_text += f" (stopped: {model['stopped']})"
    rows.append(("model", model_text))
    if model.get("cached"):
        rows.append(("model answers from the cache", f"{model['cached']} requests (verified and timed afresh)"))
    if model.get("unconstrained"):
        rows.append(("script answers unconstrained", model["unconstrained"]))
    rows += [(f"model answer rejected (x{entry['count']})", entry["reason"]) for entry in model.get("rejections", [])]
    return rows


def latency_text(latency: dict[str, Any]) -> str:
    """E.g. "eager 0.045 ms, torch.compile 0.079 ms, Triton 0.063 ms (0.71x vs eager, 1.24x vs torch.compile)"."""
    compile_part = f", torch.compile {_number(latency['compile_ms'], ' ms')}" if latency["compile_ms"] else ""
    versus_compile = f", {latency['speedup_vs_compile']:.2f}x vs torch.compile" if latency["speedup_vs_compile"] else ""
    return (
        f"eager {_number(latency['eager_ms'], ' ms')}{compile_part}, Triton {_number(latency['triton_ms'], ' ms')} "
        f"({latency['speedup_vs_eager']:.2f}x vs eager{versus_compile})"
    )


# what a check that passed established, for checks whose outcome is only "passed"
PASSED_CHECKS = {
    "poisoned_outputs": "passed: memory the candidate allocates starts poisoned, so stale values cannot match",
    "kernels_have_effect": "passed: with every Triton launch skipped, the results no longer match",
    "reference_not_reachable": "passed: the candidate ran without the reference in its process",
    "inputs_unchanged": "passed: no input was modified",
}


def _check_text(name: str, value: Any) -> str:
    if name == "triton_launches":
        return f"{value} over all trials (per kernel in the JSON report's kernels_launched)"
    if value is True:
        return PASSED_CHECKS.get(name, "passed")
    if value is False:
        return "failed"
    return "; ".join(map(str, value)) if isinstance(value, list) else str(value)


def _trials_passed(correctness: dict[str, Any]) -> str:
    """`8/8 (5 primary, 1 strided, 1 odd, ...)`: the count, and what kinds of trial it adds up."""
    kinds = Counter(shape["label"] for shape in correctness["shapes"])
    count = f"{correctness['passed']}/{correctness['trials']}"
    return f"{count} ({', '.join(f'{n} {label}' for label, n in kinds.items())})" if kinds else count


def _phase_seconds(seconds: dict[str, float]) -> str:
    """`2.41 s: candidate load 0.90 s, primary trials 0.62 s, ...`: the judge's wall time by phase."""
    phases = ", ".join(f"{phase} {value:.2f} s" for phase, value in seconds.items())
    return f"{sum(seconds.values()):.2f} s: {phases}"


def _re_verified(correctness: dict[str, Any]) -> str:
    before = correctness["previous_run"]
    return (
        f"with new inputs (seed base {correctness['seed']}); before: {before['status']}, "
        f"{before['passed']}/{before['trials']} trials, seed base {before['seed']}, "
        f"on {before['device']['kind']} ({before['device']['name']}), {before['created']}"
    )


def _ops(ops: list[str]) -> str:
    if not ops:
        return "none"
    counts = Counter(ops)
    return ", ".join(f"{op} x{n}" if n > 1 else op for op, n in counts.items())


def _number(value: float | None, unit: str = "") -> str:
    if value is None:
        return "-"
    return f"{value:.4g}{unit}"
