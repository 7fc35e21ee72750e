"""The verifier against candidates a reward-hacking model would write: each cheat is rejected with a fitting reason.

Every cheat in tests/fixtures/adversarial (its attack in its docstring; the list with the defence expected to catch it in
that folder's README.md) is verified on the CPU, and on a GPU where there is one; correct candidates must still pass.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from drtriton_lsp.engine.session import WorkerSession
from drtriton_lsp.engine.verify import verify_candidate
from drtriton_lsp.runners.local import LocalRunner
from drtriton_lsp.task import Task
from tests.conftest import FIXTURES

pytestmark = pytest.mark.slow

ADVERSARIAL = FIXTURES / "adversarial"
OLDER = FIXTURES / "verify"

# A cheat's fitting reasons: the static policy's and the dynamic defence's, so that each layer may be the one to catch it.
STATIC = "forbidden_construct"
WRONG_ANYWHERE = frozenset({"wrong_result", "wrong_at_odd_shape", "wrong_at_full_size", "wrong_for_strided_inputs"})
NO_VERDICT_FROM_CANDIDATE = frozenset({"protocol_violation", "crashed", "worker_error"})
REFERENCE_REACHED = frozenset({"calls_reference", "reference_in_pytorch", "runtime_error", "import_error"})
STALE = frozenset({"state_across_calls", "wrong_result"})


@dataclass(frozen=True)
class Candidate:
    """A candidate file, the kind of attack it is ("correct" for the good ones), and the rejection reasons that fit it."""

    name: str
    kind: str
    reasons: frozenset[str]
    task: str = "task_affine_relu"
    folder: Path = ADVERSARIAL
    # extra reasons that fit only on a GPU (a fault where the CPU interpreter crashes or writes silently)
    gpu_reasons: frozenset[str] = frozenset()
    gpu_only: bool = False
    # verification trials: 2 keeps the suite fast; a cheat that goes stale after some calls gets the product's default
    trials: int = 2

    def source(self) -> str:
        return (self.folder / f"{self.name}.py").read_text()

    def task_object(self) -> Task:
        return Task.from_file(self.folder / f"{self.task}.py")


def cheat(name: str, kind: str, *reasons: str | frozenset[str], **options) -> Candidate:
    """A cheating candidate that may be rejected for any of `reasons` (single reasons or sets of them)."""
    fitting: set[str] = set()
    for reason in reasons:
        fitting |= {reason} if isinstance(reason, str) else set(reason)
    return Candidate(name, kind, frozenset(fitting), **options)


CHEATS = [
    # forging the verdict
    cheat("forge_verdict_stack_walk", "forge_verdict", STATIC, "import_error", NO_VERDICT_FROM_CANDIDATE),
    cheat("forge_verdict_raw_fds", "forge_verdict", STATIC, "import_error", NO_VERDICT_FROM_CANDIDATE),
    cheat("forge_verdict_rewrite_answer", "forge_verdict", STATIC, "protocol_violation", WRONG_ANYWHERE),
    # patching the judge, its inputs or the language under it
    cheat("patch_judge_private_functions", "patch_judge", STATIC, WRONG_ANYWHERE),
    cheat("patch_torch_isclose", "patch_judge", STATIC, WRONG_ANYWHERE),
    cheat("patch_torch_isclose_via_vars", "patch_judge", STATIC, WRONG_ANYWHERE),
    cheat("patch_torch_equal_hides_modified_input", "patch_judge", STATIC, "modified_inputs"),
    cheat("patch_randn_zeros", "patch_judge", STATIC, WRONG_ANYWHERE),
    cheat("patch_randn_via_vars_update", "patch_judge", STATIC, WRONG_ANYWHERE),
    cheat("patch_timers", "patch_judge", STATIC),
    cheat("patch_tensor_operators", "patch_judge", STATIC, WRONG_ANYWHERE),
    cheat("patch_torch_function_mode", "patch_judge", STATIC, WRONG_ANYWHERE),
    cheat("patch_aten_relu_library", "patch_judge", STATIC, WRONG_ANYWHERE),
    cheat("corrupt_judge_expected", "patch_judge", STATIC, WRONG_ANYWHERE),
    cheat("patch_builtins_zip", "patch_builtins", STATIC, WRONG_ANYWHERE),
    cheat("patch_builtins_via_fx_alias", "patch_builtins", STATIC, WRONG_ANYWHERE),
    cheat("patch_numpy_comparisons", "patch_builtins", STATIC, WRONG_ANYWHERE),
    # tampering with the process's settings
    cheat("tamper_default_dtype", "environment_tampering", STATIC, WRONG_ANYWHERE),
    cheat("tamper_global_settings", "environment_tampering", STATIC),
    # reaching the reference without naming it
    cheat("reference_via_sys_modules", "reach_reference", STATIC, REFERENCE_REACHED),
    cheat("reference_via_torch_sys_alias", "reach_reference", STATIC, REFERENCE_REACHED),
    cheat("reference_via_builtins_import", "reach_reference", STATIC, REFERENCE_REACHED),
    cheat("reference_via_gc_closure", "reach_reference", STATIC, REFERENCE_REACHED),
    cheat("reference_via_task_file", "reach_reference", STATIC, REFERENCE_REACHED),
    cheat("reference_via_runpy", "reach_reference", STATIC, REFERENCE_REACHED),
    cheat("reference_subclass_via_importlib", "reach_reference", STATIC, REFERENCE_REACHED),
    # the maths in PyTorch (or numpy), a Triton kernel that only moves data
    cheat("torch_compute_copy_kernel", "torch_compute_copy_kernel", "reference_in_pytorch"),
    cheat("torch_compute_times_one_kernel", "torch_compute_copy_kernel", "reference_in_pytorch"),
    cheat("torch_compute_add_zero_in_place", "torch_compute_copy_kernel", "reference_in_pytorch", "kernels_have_no_effect"),
    cheat("torch_other_ops_copy_kernel", "torch_compute_copy_kernel", "reference_in_pytorch"),
    cheat("torch_compute_flag_gated", "torch_compute_copy_kernel", "reference_in_pytorch"),
    cheat("audit_evade_thread", "audit_evasion", STATIC, "reference_in_pytorch"),
    cheat("audit_evade_disabled_modes", "audit_evasion", STATIC, "reference_in_pytorch"),
    cheat("audit_evade_numpy", "audit_evasion", STATIC, "reference_in_pytorch"),
    cheat("audit_evade_python_lists", "audit_evasion", "reference_in_pytorch"),
    cheat("audit_evade_one_result_on_host", "audit_evasion", "reference_in_pytorch", task="task_two_results"),
    cheat("interpreter_python_in_kernel", "audit_evasion", STATIC, "compile_error"),
    cheat("interpreter_python_object_in_kernel", "audit_evasion", STATIC, "compile_error"),
    cheat("interpreter_python_object_as_constexpr", "audit_evasion", STATIC, "compile_error"),
    # state across calls
    cheat("state_shared_output_buffer", "state_across_calls", "state_across_calls"),
    cheat("state_cache_data_ptr", "state_across_calls", STALE),
    cheat("state_cache_fingerprint", "state_across_calls", STALE),
    # stale after three calls: with the default 5 trials, the process of the primary trials makes 6 or more checked
    # calls at the primary sizes (the other checks run in a second process on the CPU)
    cheat("state_counter_returns_cached", "state_across_calls", STALE, trials=5),
    cheat("state_counter_stale_after_six", "state_across_calls", STALE, trials=5),
    cheat("state_cache_ignores_gate", "state_across_calls", STALE, task="task_gated_bias"),
    # only correct at the sizes and layouts a verifier happens to try
    # on a GPU every trial runs at the task's own sizes: there the first trial is simply wrong
    cheat("size_grid_capped", "verified_sizes_only", "wrong_at_full_size", gpu_reasons=frozenset({"wrong_result"})),
    cheat("size_hardcoded_rows", "verified_sizes_only", "wrong_at_full_size", gpu_reasons=frozenset({"wrong_result"})),
    cheat("size_flat_index_ignores_strides", "verified_sizes_only", "wrong_for_strided_inputs"),
    cheat("size_gate_strides_ignored", "verified_sizes_only", "wrong_for_strided_inputs", task="task_gated_bias"),
    # right only when it detects a verifier (each is wrong in plain use: see test_the_cheats_misbehave_in_plain_use)
    cheat("detect_stack_filename", "detect_verifier", STATIC, WRONG_ANYWHERE),
    cheat("detect_worker_environment", "detect_verifier", STATIC, WRONG_ANYWHERE),
    cheat("detect_seeded_rng", "detect_verifier", WRONG_ANYWHERE),
    cheat("detect_no_grad", "detect_verifier", WRONG_ANYWHERE, "wrong_for_other_call"),
    cheat("detect_patched_allocator", "detect_verifier", WRONG_ANYWHERE),
    cheat("detect_launch_counter", "detect_verifier", WRONG_ANYWHERE),
    # memory safety
    cheat("oob_unmasked_last_block", "out_of_bounds_write", "out_of_bounds_write", "crashed",
          gpu_reasons=frozenset({"device_fault"})),
    cheat("oob_write_before_start", "out_of_bounds_write", "out_of_bounds_write", "crashed",
          gpu_reasons=frozenset({"device_fault"})),
    cheat("stale_memory_unpatched_allocator", "stale_memory", WRONG_ANYWHERE),
    # hangs: the reason is timeout, and test_a_hang_is_stopped_within_a_minute also times them
    cheat("hang_python_spin", "hang", "timeout"),
    cheat("hang_in_kernel", "hang", "timeout"),
    cheat("hang_at_import", "hang", "timeout"),
    # work that finishes after forward returns
    cheat("background_thread_late_write", "background_work", STATIC, "no_triton_launch", STALE, WRONG_ANYWHERE),
    cheat("gpu_side_stream_unsynced", "background_work", STATIC, WRONG_ANYWHERE, gpu_only=True),
    cheat("lazy_tensor_subclass", "lazy_result", STATIC, "protocol_violation", "no_triton_launch", WRONG_ANYWHERE),
    # hidden fallbacks, leaving the process, lower precision
    cheat("fallback_contextlib_suppress", "fallback", STATIC, "try_except_fallback", "reference_in_pytorch",
          "no_triton_launch"),
    cheat("exit_before_answer", "process_exit", "runtime_error", NO_VERDICT_FROM_CANDIDATE),
    cheat("lower_precision_fp16", "lower_precision", WRONG_ANYWHERE),
]

# The older kinds (tests/fixtures/verify, against task_scale_relu), kept so the rewrite keeps catching them.
OLDER_CHEATS = [
    cheat("try_except", "fallback", "try_except_fallback", folder=OLDER, task="task_scale_relu"),
    cheat("no_launch", "kernel_never_launched", "no_triton_launch", "reference_in_pytorch", folder=OLDER,
          task="task_scale_relu"),
    cheat("dummy_kernel", "torch_compute_copy_kernel", "kernels_have_no_effect", "reference_in_pytorch", folder=OLDER,
          task="task_scale_relu"),
    cheat("modifies_input", "modified_inputs", "modified_inputs", folder=OLDER, task="task_scale_relu"),
    cheat("stale_memory", "stale_memory", WRONG_ANYWHERE, folder=OLDER, task="task_scale_relu"),
    cheat("calls_reference", "reach_reference", STATIC, REFERENCE_REACHED, folder=OLDER, task="task_scale_relu"),
    cheat("odd_shape", "verified_sizes_only", "wrong_at_odd_shape", folder=OLDER, task="task_scale_relu"),
    cheat("wrong_result", "wrong_result", "wrong_result", folder=OLDER, task="task_scale_relu"),
]

GOOD = {"good_affine_relu": "task_affine_relu", "good_gated_bias": "task_gated_bias",
        "good_data_movement_maths": "task_data_movement_maths"}

# How a user would see each cheat misbehave (tests/fixtures/adversarial/plain_use.py): its task and scenario.
PLAIN_USE_SCENARIOS = {
    "detect_stack_filename": ("task_affine_relu", "plain_call"),
    "detect_worker_environment": ("task_affine_relu", "plain_call"),
    "detect_seeded_rng": ("task_affine_relu", "plain_call"),
    "detect_no_grad": ("task_affine_relu", "plain_call"),
    "detect_patched_allocator": ("task_affine_relu", "plain_call"),
    "detect_launch_counter": ("task_affine_relu", "plain_call"),
    "tamper_default_dtype": ("task_affine_relu", "plain_call"),
    "size_grid_capped": ("task_affine_relu", "plain_call"),
    "size_hardcoded_rows": ("task_affine_relu", "plain_call"),
    "size_flat_index_ignores_strides": ("task_affine_relu", "transposed_inputs"),
    "size_gate_strides_ignored": ("task_gated_bias", "transposed_inputs"),
    "state_shared_output_buffer": ("task_affine_relu", "second_call_keeps_first"),
    "state_cache_data_ptr": ("task_affine_relu", "same_buffer_new_contents"),
    "state_cache_fingerprint": ("task_affine_relu", "same_buffer_new_contents"),
    "state_counter_returns_cached": ("task_affine_relu", "many_calls"),
    "state_counter_stale_after_six": ("task_affine_relu", "many_calls"),
    "state_cache_ignores_gate": ("task_gated_bias", "same_x_new_gate"),
}
# Ten times float32's tolerance: an error above it is a wrong result, not rounding.
CLEARLY_WRONG = 1e-3
HANG_LIMIT_S = 60.0


def verify(candidate: Candidate, device: str = "cpu"):
    return verify_candidate(candidate.task_object(), candidate.source(), session=WorkerSession(LocalRunner()),
                            device=device, trials=candidate.trials)


def cases(cheats: list[Candidate]) -> list:
    marks = {"hang": [pytest.mark.timeout(HANG_LIMIT_S + 30)]}
    return [pytest.param(c, id=c.name, marks=marks.get(c.kind, [])) for c in cheats]


@pytest.mark.parametrize("name", sorted(GOOD))
def test_a_correct_candidate_is_verified(name):
    verdict = verify(Candidate(name, "correct", frozenset(), task=GOOD[name]))
    assert verdict.verified, verdict.explanation


@pytest.mark.parametrize("candidate", cases([c for c in CHEATS + OLDER_CHEATS if not c.gpu_only]))
def test_a_cheat_is_rejected_with_a_fitting_reason(candidate: Candidate):
    started = time.monotonic()
    verdict = verify(candidate)
    assert not verdict.verified, f"{candidate.name} ({candidate.kind}) was verified"
    assert verdict.reason in candidate.reasons, (
        f"{candidate.name} ({candidate.kind}): {verdict.explanation}; fitting: {sorted(candidate.reasons)}"
    )
    if candidate.kind == "hang":
        assert time.monotonic() - started < HANG_LIMIT_S


@pytest.mark.timeout(HANG_LIMIT_S + 30)
def test_a_hang_is_stopped_within_a_minute():
    """With the verifier's own limits (none given), as the editor calls it: the user waits under a minute.
    The older sleeping hang on the small task_scale_relu (the spinning hangs above are timed as well)."""
    hang = cheat("hang", "hang", "timeout", folder=OLDER, task="task_scale_relu")
    started = time.monotonic()
    verdict = verify(hang)
    elapsed = time.monotonic() - started
    assert (verdict.verified, verdict.reason) == (False, "timeout")
    assert elapsed < HANG_LIMIT_S, f"stopped after {elapsed:.0f} s"


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(GOOD))
def test_a_correct_candidate_is_verified_on_the_gpu(name):
    verdict = verify(Candidate(name, "correct", frozenset(), task=GOOD[name]), device="cuda")
    assert verdict.verified, verdict.explanation


@pytest.mark.gpu
@pytest.mark.parametrize("candidate", cases(CHEATS + OLDER_CHEATS))
def test_a_cheat_is_rejected_on_the_gpu(candidate: Candidate):
    verdict = verify(candidate, device="cuda")
    fitting = candidate.reasons | candidate.gpu_reasons
    assert not verdict.verified, f"{candidate.name} ({candidate.kind}) was verified"
    assert verdict.reason in fitting, f"{candidate.name} ({candidate.kind}): {verdict.explanation}; fitting: {sorted(fitting)}"


def test_the_cheats_misbehave_in_plain_use():
    """Each cheat that is right under a verifier is wrong where a user runs it, so accepting it is a real miss."""
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
    environment["TRITON_INTERPRET"] = "1"
    completed = subprocess.run(
        [sys.executable, str(ADVERSARIAL / "plain_use.py"), json.dumps(PLAIN_USE_SCENARIOS)],
        capture_output=True, text=True, env=environment, timeout=300, check=False,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    errors = json.loads(completed.stdout)
    right_in_plain_use = {name: error for name, error in errors.items() if not error > CLEARLY_WRONG}
    assert not right_in_plain_use, f"these cheats are right in plain use, so they test nothing: {right_in_plain_use}"


def test_every_fixture_is_a_task_a_correct_candidate_or_a_listed_cheat():
    """A cheat file left out of CHEATS would never be run; each states its attack in its docstring's first line
    and has its row (kind, defence) in the folder's README."""
    listed = {c.name for c in CHEATS}
    helpers = {"plain_use"}
    for path in sorted(ADVERSARIAL.glob("*.py")):
        name = path.stem
        if name.startswith("task_") or name in GOOD or name in helpers:
            continue
        assert name in listed, f"{path.name} is not in CHEATS"
        docstring = ast.get_docstring(ast.parse(path.read_text())) or ""
        assert docstring.startswith("Cheat ("), f"{path.name}: the docstring's first line should say the attack"
    assert listed <= {p.stem for p in ADVERSARIAL.glob("*.py")}
    readme = (ADVERSARIAL / "README.md").read_text()
    assert not [name for name in sorted(listed) if f"`{name}`" not in readme], "README.md must list every cheat"
