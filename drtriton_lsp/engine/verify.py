"""Verification, caller side: a static look at the candidate, then its trials in a worker.

This module never imports torch or runs the candidate. A worker that crashes (an out-of-bounds
store), hangs or overuses memory is itself the verdict: the candidate is rejected with that name.
"""

from __future__ import annotations

import ast
import threading
from dataclasses import dataclass, field
from typing import Any, Callable

from drtriton_lsp.engine.task import Task
from drtriton_lsp.runners.local import JobFailure, JobLimits, LocalRunner
from drtriton_lsp.source.dispatch import is_dispatch_helper_statement

# Every reason a candidate can be rejected for, with the sentence a report shows.
REJECTION_REASONS = {
    "no_triton_kernel": "the candidate defines no @triton.jit kernel",
    "no_model_new": "the candidate defines no ModelNew class",
    "try_except_fallback": "the candidate uses try/except, which can hide a fallback to PyTorch",
    "calls_reference": "the candidate uses the reference Model",
    "import_error": "the candidate failed to import",
    "compile_error": "a Triton kernel failed to compile",
    "runtime_error": "the candidate raised an exception",
    "no_triton_launch": "no Triton kernel was launched",
    "kernels_have_no_effect": "the output is right even with the Triton kernels skipped",
    "modified_inputs": "the candidate modified its inputs",
    "wrong_result": "the results differ from the reference",
    "wrong_at_odd_shape": "the results differ from the reference at odd sizes (a missing mask?)",
    "timeout": "the candidate did not finish in time (a hang?)",
    "crashed": "the worker process crashed (an out-of-bounds memory access?)",
    "device_fault": "a kernel faulted on the GPU (an out-of-bounds or misaligned access?)",
    "memory_limit": "the candidate used more memory than allowed",
    "worker_error": "the worker failed before judging the candidate",
    "reference_failed": "the task's own Model raised on the inputs get_inputs() draws",
}


class Cancelled(Exception):
    """The user cancelled the job; nothing was judged."""


@dataclass
class Verdict:
    """The outcome of verifying one candidate (the report's `correctness` block plus the verdict)."""

    verified: bool
    reason: str | None
    detail: str
    interpreter: bool = False
    trials: int = 0
    passed: int = 0
    max_abs_err: float | None = None
    max_rel_err: float | None = None
    tolerance: dict[str, dict[str, float]] = field(default_factory=dict)
    shapes: list[dict[str, Any]] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)
    # the base of the random draws (weights, inputs); a re-verification uses another base, so other inputs
    seed: int = 0

    @property
    def explanation(self) -> str:
        if self.verified:
            return "verified"
        sentence = REJECTION_REASONS.get(self.reason or "", self.reason or "rejected")
        return f"{sentence}: {self.detail}" if self.detail else sentence


def static_rejection(candidate_source: str) -> Verdict | None:
    """Reject, without running it, a candidate that cannot be trusted by construction."""
    try:
        tree = ast.parse(candidate_source)
    except SyntaxError as error:
        return Verdict(False, "import_error", f"syntax error at line {error.lineno}: {error.msg}")
    has_kernel = False
    has_model_new = False
    # A written-back candidate defines its own Model (ModelNew = Model) and carries the dispatch helper,
    # whose guarded `import triton` is the one try statement allowed.
    defines_model = any(isinstance(node, ast.ClassDef) and node.name == "Model" for node in tree.body)
    checked = [statement for statement in tree.body if not is_dispatch_helper_statement(statement)]
    for node in (inner for statement in checked for inner in ast.walk(statement)):
        if isinstance(node, (ast.Try, getattr(ast, "TryStar", ast.Try))):
            return Verdict(False, "try_except_fallback", f"try statement at line {node.lineno}")
        if isinstance(node, ast.Name) and node.id == "Model" and not defines_model:
            return Verdict(False, "calls_reference", f"the name Model is used at line {node.lineno}")
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names = [alias.name for alias in node.names] + [getattr(node, "module", None) or ""]
            if any("drtriton_task" in name for name in names):
                return Verdict(False, "calls_reference", f"the task module is imported at line {node.lineno}")
        if isinstance(node, ast.ClassDef) and node.name == "ModelNew" or _assigns(node, "ModelNew"):
            has_model_new = True
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            has_kernel = has_kernel or any(_is_triton_jit(d) for d in node.decorator_list)
    if not has_model_new:
        return Verdict(False, "no_model_new", "")
    if not has_kernel:
        return Verdict(False, "no_triton_kernel", "")
    return None


def _assigns(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)


def _is_triton_jit(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    text = ast.unparse(target)
    return text in ("triton.jit", "jit") or text.endswith(".jit")


def verify_candidate(
    task: Task,
    candidate_source: str,
    *,
    device: str,
    runner: LocalRunner,
    trials: int = 5,
    input_shapes: dict[str, Any] | None = None,
    limits: JobLimits | None = None,
    on_progress: Callable[[str], None] | None = None,
    cancel: threading.Event | None = None,
    python_path: list[str] | None = None,
    tf32: bool = False,
    seed: int = 0,
    prepare_next: dict[str, str | None] | None = None,
) -> Verdict:
    """Judge `candidate_source` against `task` on `device` ("cpu" runs Triton's interpreter).

    tf32: the candidate computes float32 matmuls in TF32 by request; float32 outputs then get TF32's tolerance.
    seed: the base of every random draw in the worker; verifying again with another base tries other inputs.
    prepare_next: the worker environment of a job that follows (see `LocalRunner.call`), started meanwhile.
    """
    rejection = static_rejection(candidate_source)
    if rejection is not None:
        rejection.seed = seed
        return rejection
    params = {
        "task": task.to_json(),
        "candidate": candidate_source,
        "device": device,
        "trials": trials,
        "tf32": tf32,
        "seed": seed,
    }
    if input_shapes is not None:
        params["input_shapes"] = input_shapes
    try:
        result = runner.call(
            "verify",
            params,
            limits=limits or JobLimits(),
            env=worker_environment(device),
            python_path=python_path,
            on_progress=on_progress,
            cancel=cancel,
            prepare_next=prepare_next,
        )
    except JobFailure as failure:
        if failure.reason == "cancelled":
            raise Cancelled() from failure
        return Verdict(False, failure.reason, failure.detail, interpreter=device == "cpu", seed=seed)
    return Verdict(
        verified=result["verified"],
        reason=result["reason"],
        detail=result["detail"],
        interpreter=result["interpreter"],
        trials=result["trials"],
        passed=result["passed"],
        max_abs_err=result["max_abs_err"],
        max_rel_err=result["max_rel_err"],
        tolerance=result["tolerance"],
        shapes=result["shapes"],
        checks=result["checks"],
        seed=seed,
    )


def worker_environment(device: str) -> dict[str, str | None]:
    """Environment for a worker: the Triton interpreter on CPU, compiled kernels on CUDA."""
    return {"TRITON_INTERPRET": "1" if device == "cpu" else None}
