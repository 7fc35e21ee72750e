"""Verification, caller side: the static policy on the candidate's text, then the judge in a worker.

This module never imports torch or runs the candidate. The judge (worker.judge, in a worker) runs the candidate in a
process of its own and decides from data alone; a judge worker that crashes, hangs or overuses memory is itself
the verdict: the candidate is rejected with that name.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from drtriton_lsp.compiler.graph import OpGraph
from drtriton_lsp.engine.candidate_policy import policy_violation
from drtriton_lsp.engine.session import Cancelled, WorkerSession
from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners.runner import JobFailure
from drtriton_lsp.task import Task

# Every reason a candidate can be rejected for, with the sentence a report shows.
REJECTION_REASONS = {
    "no_triton_kernel": "the candidate defines no @triton.jit kernel",
    "no_model_new": "the candidate defines no ModelNew class",
    "try_except_fallback": "the candidate uses try/except, which can hide a fallback to PyTorch",
    "calls_reference": "the candidate uses the reference Model",
    "forbidden_construct": "the candidate uses code the verifier does not allow (it could tamper with the checks)",
    "import_error": "the candidate failed to import",
    "compile_error": "a Triton kernel failed to compile",
    "runtime_error": "the candidate raised an exception",
    "no_triton_launch": "no Triton kernel was launched",
    "kernels_have_no_effect": "the output is right even with the Triton kernels skipped",
    "reference_in_pytorch": "the maths ran in PyTorch; the Triton kernels only moved data",
    "modified_inputs": "the candidate modified its inputs",
    "wrong_result": "the results differ from the reference",
    "wrong_at_odd_shape": "the results differ from the reference at odd sizes (a missing mask?)",
    "wrong_for_strided_inputs": "the results differ from the reference for non-contiguous inputs",
    "wrong_under_replay": "the results differ from the reference when the written dispatch replays CUDA graphs",
    "wrong_at_full_size": "the results differ from the reference at the task's own sizes",
    "wrong_for_other_instance": "the results differ from the reference for an instance with other constructor values",
    "wrong_for_other_call": "the results differ from the reference for another call (keywords, defaults, scalars)",
    "state_across_calls": "a result depends on an earlier call, or a later call changed an earlier output",
    "out_of_bounds_write": "a kernel wrote outside its buffers (a missing mask?)",
    "timeout": "the candidate did not finish in time (a hang?)",
    "crashed": "the candidate's process crashed (an out-of-bounds memory access?)",
    "device_fault": "a kernel faulted on the GPU (an out-of-bounds or misaligned access?)",
    "memory_limit": "the candidate used more memory than allowed",
    "protocol_violation": "the candidate's process answered something other than results",
    "worker_error": "the worker failed before judging the candidate",
    "reference_failed": "the task's own Model raised on the inputs get_inputs() draws",
}


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
    # from the ATen audit of what ran (None when the candidate never ran that far): the PyTorch ops the candidate
    # ran itself, and the reference's ops it did not run in PyTorch (computed by its Triton kernels)
    kept_ops: list[str] | None = None
    replaced_ops: list[str] | None = None
    # wall seconds by phase of the judge's work (loading the reference, the candidate, each kind of trial)
    seconds: dict[str, float] = field(default_factory=dict)

    @property
    def explanation(self) -> str:
        if self.verified:
            return "verified"
        sentence = REJECTION_REASONS.get(self.reason or "", self.reason or "rejected")
        return f"{sentence}: {self.detail}" if self.detail else sentence


def static_rejection(candidate_source: str, task_source: str | None = None) -> Verdict | None:
    """Reject, without running it, a candidate that cannot be trusted by construction (engine.candidate_policy)."""
    violation = policy_violation(candidate_source, task_source)
    return Verdict(False, violation.reason, violation.detail) if violation else None


def verify_candidate(
    task: Task,
    candidate_source: str,
    *,
    session: WorkerSession,
    device: str,
    trials: int = 5,
    input_shapes: dict[str, Any] | None = None,
    tf32: bool = False,
    seed: int = 0,
    prepare_next: dict[str, str | None] | None = None,
    prepare_next_for: str = "benchmark",
) -> Verdict:
    """Judge `candidate_source` against `task` on `device` ("cpu" runs Triton's interpreter), in a worker of
    `session` under its verify limits.

    tf32: the candidate computes float32 matmuls in TF32 by request; float32 outputs then get TF32's tolerance.
    seed: the base of every random draw in the worker; verifying again with another base tries other inputs.
    prepare_next: the worker environment of the job that follows (see `Runner.call`), started meanwhile;
    prepare_next_for: that job's method (a benchmark unless said otherwise).
    A runner that could not run the judge (a lost ssh connection) raises DrtritonError: that is no verdict.
    """
    rejection = static_rejection(candidate_source, task.source)
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
        result = session.call(
            "verify",
            params,
            limits=session.limits.verify,
            env=worker_environment(device),
            prepare_next=prepare_next,
            prepare_next_for=prepare_next_for,
        )
    except JobFailure as failure:
        if failure.reason == "cancelled":
            raise Cancelled() from failure
        if failure.runner_fault:
            raise DrtritonError(f"the verify worker failed: {failure.detail}", failure.hint) from failure
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
        kept_ops=result.get("kept_ops"),
        replaced_ops=result.get("replaced_ops"),
        seconds=result.get("seconds", {}),
    )


def user_input_shapes(graph: OpGraph) -> dict[str, Any]:
    """The exported (symbolic) shapes of the tensor inputs, so verification can plan odd sizes."""
    user_inputs = [g for g in graph.inputs if g.kind == "user_input"]
    return {
        "inputs": [list(g.spec.shape) if g.spec else None for g in user_inputs],
        "ranges": graph.symbol_ranges,
    }


def worker_environment(device: str) -> dict[str, str | None]:
    """Environment for a worker: the Triton interpreter on CPU, compiled kernels on CUDA."""
    return {"TRITON_INTERPRET": "1" if device == "cpu" else None}
