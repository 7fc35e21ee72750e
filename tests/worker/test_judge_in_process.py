"""The judge's decisions on the verifier's fixtures, with the candidate's side answered in this process.

`candidate_host.Host` answers the judge's requests directly instead of over a pipe from its own interpreter: the
same checks, trials and verdicts as tests/engine/test_verify.py, without two interpreter starts per verification
(about a second each instead of six). The process boundary itself (crashes, hangs, forged messages, patches that
must die with the candidate) stays with test_verify.py and test_adversarial.py.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import pytest
import torch

if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")  # before Triton defines its own library kernels

from triton.runtime.jit import JITFunction  # noqa: E402

from drtriton_lsp.task import Task  # noqa: E402
from drtriton_lsp.worker import candidate_process, judge  # noqa: E402
from drtriton_lsp.worker.candidate_host import CandidateFailed, Host  # noqa: E402
from tests.conftest import FIXTURES  # noqa: E402

try:
    from triton.runtime.interpreter import InterpretedFunction
except ImportError:  # Triton builds without the interpreter module
    InterpretedFunction = None

pytestmark = pytest.mark.slow  # the kernels run under Triton's interpreter
VERIFY_FIXTURES = FIXTURES / "verify"


class CandidateInThisProcess:
    """What the judge asks of its CandidateProcess, answered by a Host in this process."""

    def __init__(self, host: Host) -> None:
        self.exchange = Path(tempfile.mkdtemp(prefix="drtriton-exchange-"))
        self.host = host
        host.exchange = self.exchange

    def request(self, op: str, params: dict, limit_s: float, doing: str) -> dict:
        try:
            return getattr(self.host, op)(params)
        except CandidateFailed as failure:
            raise judge.Rejected(failure.kind, f"{doing}: {failure}") from None

    def send(self, op: str, params: dict) -> None:
        self.sent, self.sent_at = (op, params), time.monotonic()

    def answer(self, limit_s: float, doing: str) -> dict:
        op, params = self.sent
        return self.request(op, params, limit_s, doing)

    def close(self) -> None:
        shutil.rmtree(self.exchange, ignore_errors=True)


@pytest.fixture(autouse=True)
def one_candidate_process(monkeypatch):
    """Every check in the one Host of this process (two Hosts cannot share a process: each patches Triton)."""
    monkeypatch.setattr(candidate_process, "SIDE_PROCESS_ON_CPU", False)


@pytest.fixture(scope="module")
def host():
    """One Host for the module: it patches Triton's launch and compile entry points, put back at the end."""
    with pytest.MonkeyPatch.context() as patches:
        patches.setattr(JITFunction, "run", JITFunction.run)
        patches.setattr(JITFunction, "_do_compile", getattr(JITFunction, "_do_compile", None), raising=False)
        if InterpretedFunction is not None:
            patches.setattr(InterpretedFunction, "run", InterpretedFunction.run)
        yield Host(Path(tempfile.gettempdir()), send=lambda message: None)


@pytest.fixture
def verify(host):
    def run(candidate: str, task: str = "task_scale_relu", trials: int = 2, **params) -> dict:
        candidate_process._started_ahead.append(CandidateInThisProcess(host))
        params = {
            "task": Task.from_file(VERIFY_FIXTURES / f"{task}.py").to_json(),
            "candidate": (VERIFY_FIXTURES / f"{candidate}.py").read_text(),
            "device": "cpu",
            "trials": trials,
            "seed": 0,
            **params,
        }
        return judge.Judge(params, progress=lambda message: None).run()

    return run


def test_a_correct_candidate_passes_every_check_with_an_honest_record(verify):
    result = verify("good", trials=3)
    assert result["verified"], result["detail"]
    assert [shape["label"] for shape in result["shapes"]] == (
        ["primary"] * 3 + ["strided", "autograd on, keyword arguments", "odd"]
    )
    assert result["passed"] == result["trials"] == 6
    assert result["tolerance"] == {"float32": {"atol": 1e-4, "rtol": 1e-4}}
    assert result["kept_ops"] == []
    assert result["replaced_ops"] == ["aten.add.Tensor", "aten.mul.Tensor", "aten.relu.default"]
    checks = result["checks"]
    assert checks["kernels_have_effect"] is True and checks["triton_launches"] == 6
    assert checks["kernels_launched"] == {"scale_bias_relu_kernel": 6}
    assert checks["autograd_on"] == "tried once, with keyword arguments"
    assert checks["state_across_calls"].startswith("checked") and checks["strided_inputs"].startswith("tried")
    assert checks["odd_shapes"] == "tried" and checks["full_size"].startswith("the primary trials ran")
    assert checks["weights"] == "copied from the reference"
    assert checks["other_instances_and_calls"] == [
        "instance other int constructor values (64->65): skipped, the reference rejects it (RuntimeError: The size of "
        "tensor a (64) must match the size of tensor b (65) at non-singleton dimension 1)",
    ]
    assert result["max_abs_err"] <= 1e-6


@pytest.mark.parametrize(
    ("candidate", "reason", "detail"),
    [
        ("no_launch", "no_triton_launch", "primary: the candidate's forward launched no Triton kernel"),
        ("modifies_input", "modified_inputs", "primary: input 0 was changed by the candidate"),
        ("stale_memory", "wrong_result", "primary: output 0 (float32): "),
        ("odd_shape", "wrong_at_odd_shape", "odd: output 0 (float32): "),
        ("wrong_result", "wrong_result", "primary: output 0 (float32): "),
        ("dummy_kernel", "reference_in_pytorch", "the maths ran in PyTorch"),
    ],
)
def test_each_bad_candidate_is_rejected_with_its_reason_and_what_was_seen(verify, candidate, reason, detail):
    result = verify(candidate)
    assert (result["verified"], result["reason"]) == (False, reason)
    assert detail in result["detail"], result["detail"]


def test_a_size_the_reference_rejects_is_skipped_not_blamed_on_the_candidate(verify):
    result = verify("index_into_output", task="task_index_into_output")
    assert result["verified"], result["detail"]
    assert result["checks"]["odd_shapes"].startswith("skipped where the reference itself cannot run")


ADVERSARIAL = FIXTURES / "adversarial"


@pytest.mark.parametrize(
    ("candidate", "task", "reasons"),
    [
        ("good_affine_relu", "task_affine_relu", {None}),
        ("good_gated_bias", "task_gated_bias", {None}),
        ("torch_compute_copy_kernel", "task_affine_relu", {"reference_in_pytorch"}),
        ("torch_compute_times_one_kernel", "task_affine_relu", {"reference_in_pytorch"}),
        ("torch_other_ops_copy_kernel", "task_affine_relu", {"reference_in_pytorch"}),
        ("torch_compute_flag_gated", "task_affine_relu", {"reference_in_pytorch"}),
        ("torch_compute_add_zero_in_place", "task_affine_relu", {"reference_in_pytorch", "kernels_have_no_effect"}),
        ("state_shared_output_buffer", "task_affine_relu", {"state_across_calls"}),
        ("state_cache_data_ptr", "task_affine_relu", {"state_across_calls", "wrong_result"}),
        ("state_cache_fingerprint", "task_affine_relu", {"state_across_calls", "wrong_result"}),
        ("state_counter_returns_cached", "task_affine_relu", {"state_across_calls", "wrong_result"}),
        ("state_cache_ignores_gate", "task_gated_bias", {"state_across_calls", "wrong_result"}),
        ("size_grid_capped", "task_affine_relu", {"wrong_at_full_size"}),
        ("size_hardcoded_rows", "task_affine_relu", {"wrong_at_full_size"}),
        ("size_flat_index_ignores_strides", "task_affine_relu", {"wrong_for_strided_inputs"}),
        ("size_gate_strides_ignored", "task_gated_bias", {"wrong_for_strided_inputs"}),
    ],
)
def test_cheats_that_run_safely_in_this_process_are_rejected_for_what_they_do(host, candidate, task, reasons):
    candidate_process._started_ahead.append(CandidateInThisProcess(host))
    params = {
        "task": Task.from_file(ADVERSARIAL / f"{task}.py").to_json(),
        "candidate": (ADVERSARIAL / f"{candidate}.py").read_text(),
        "device": "cpu", "trials": 2, "seed": 0,
    }
    result = judge.Judge(params, progress=lambda message: None).run()
    assert result["reason"] in reasons, result["detail"]
    assert result["verified"] is (reasons == {None})


@pytest.mark.parametrize(("dtype", "label"), [("float16", "float16"), ("bfloat16", "bfloat16 (interpreter)")])
def test_a_half_precision_result_three_tolerances_off_is_rejected(verify, dtype, label):
    result = verify("off_by_three_tolerances", task=f"task_scale_{dtype}")
    assert (result["verified"], result["reason"]) == (False, "wrong_result")
    assert f"output 0 ({label}): " in result["detail"] and "against float64" in result["detail"]


def test_a_task_whose_own_model_raises_is_reported_as_such_not_blamed_on_the_candidate(verify):
    result = verify("good", task="task_raises")
    assert (result["verified"], result["reason"]) == (False, "reference_failed")
    assert "ValueError: this task's forward always fails" in result["detail"]


def test_reduced_sizes_the_reference_rejects_fall_back_to_the_tasks_own_sizes(verify):
    free_rows = {"inputs": [["s0", 64]], "ranges": {"s0": [2, None]}}
    result = verify("good", task="task_fixed_rows", input_shapes=free_rows)
    assert result["verified"], result["detail"]
    assert result["checks"]["reduced_shapes"].startswith("not used: the reference cannot run at them (ValueError")
    assert [shape["inputs"] for shape in result["shapes"] if shape["label"] == "primary"] == [[[1024, 64]]] * 2


def test_scalar_arguments_are_tried_by_keyword_left_out_and_changed(verify):
    result = verify("scaled_call", task="task_scaled_call")
    assert result["verified"], result["detail"]
    assert result["checks"]["other_instances_and_calls"] == [
        "call defaults for scale: matched", "call scale=2.5: matched",
    ]
    assert result["checks"]["autograd_on"] == "tried once, with keyword arguments"


def test_the_candidates_process_answers_each_request_by_id_with_a_result_or_the_candidates_error(tmp_path, monkeypatch):
    import io
    import json

    from drtriton_lsp.worker.candidate_host import serve

    monkeypatch.setattr(JITFunction, "run", JITFunction.run)  # put back after the test: serve's Host patches them
    monkeypatch.setattr(JITFunction, "_do_compile", getattr(JITFunction, "_do_compile", None), raising=False)
    if InterpretedFunction is not None:
        monkeypatch.setattr(InterpretedFunction, "run", InterpretedFunction.run)
    torch.save([], tmp_path / "init.pt")
    torch.save({}, tmp_path / "state.pt")
    (tmp_path / "broken.py").write_text("def broken(:\n")
    (tmp_path / "refuses.py").write_text("class ModelNew:\n    def __init__(self):\n        raise RuntimeError('no')\n")
    (tmp_path / "plain.py").write_text("import torch\nclass ModelNew(torch.nn.Module):\n    pass\n")
    load = {"op": "load", "init": "init.pt", "init_seed": 1, "device": "cpu"}
    requests = [
        {"id": 1, **load, "source": "broken.py"},
        {"id": 2, **load, "source": "refuses.py"},
        {"id": 3, **load, "source": "plain.py"},
        {"id": 4, "op": "weights", "name": "primary", "state": "state.pt"},
        {"id": 5, "op": "call", "instance": "other", "inputs": "inputs.pt", "outputs": "outputs.pt"},
        {"op": "exit"},
        {"id": 6, **load, "source": "plain.py"},  # after exit: never read
    ]
    monkeypatch.setattr("sys.stdin", io.StringIO("".join(json.dumps(r) + "\n" for r in requests)))
    said = io.StringIO()
    serve(tmp_path, said)
    messages = [json.loads(line) for line in said.getvalue().splitlines()]
    assert messages[0] == {"event": "ready"}
    assert [m.get("id") for m in messages[1:]] == [1, 2, 3, 4, 5]
    assert messages[1]["error"]["kind"] == "import_error" and "SyntaxError" in messages[1]["error"]["message"]
    assert messages[2]["error"] == {"kind": "runtime_error", "message": "ModelNew(*init) raised RuntimeError: no"}
    # built first (while the judge builds the reference), then given the reference's weights
    assert messages[3] == {"id": 3, "result": {"ipc_probe_sum": None}}
    assert messages[4] == {"id": 4, "result": {"weights": "copied from the reference"}}
    assert messages[5]["error"]["kind"] == "runtime_error" and "KeyError" in messages[5]["error"]["message"]
    # the traceback's end, where it failed
    assert messages[5]["error"]["traceback"].rstrip().endswith("KeyError: 'other'")


def test_the_task_failing_at_a_later_trial_ends_the_verification_as_the_tasks_failure(verify, monkeypatch):
    # the reference runs while the candidate computes from the second trial on: its failure there is the task's
    reference_calls = []
    reference_outputs = judge.Judge._reference_outputs

    def failing_on_the_third_call(self, call, *args, **kwargs):
        reference_calls.append(call)
        if len(reference_calls) == 3:
            raise judge.ReferenceFailed("ValueError: the task's forward raised")
        return reference_outputs(self, call, *args, **kwargs)

    monkeypatch.setattr(judge.Judge, "_reference_outputs", failing_on_the_third_call)
    result = verify("good", trials=3)
    assert (result["verified"], result["reason"]) == (False, "reference_failed")
    assert result["detail"] == "primary: ValueError: the task's forward raised"


def test_the_full_size_trial_is_skipped_when_its_estimate_is_over_the_budget(host, monkeypatch):
    # the estimate scales the slowest call so far by the input elements: any call's time puts it over a tiny budget
    def run() -> dict:
        candidate_process._started_ahead.append(CandidateInThisProcess(host))
        params = {
            "task": Task.from_file(ADVERSARIAL / "task_affine_relu.py").to_json(),
            "candidate": (ADVERSARIAL / "good_affine_relu.py").read_text(),
            "device": "cpu", "trials": 2, "seed": 0,
        }
        return judge.Judge(params, progress=lambda message: None).run()

    tried = run()
    assert tried["verified"] and tried["checks"]["full_size"] == "tried once at the task's own sizes"
    monkeypatch.setattr(judge, "FULL_SIZE_BUDGET_S", 1e-9)
    skipped = run()
    assert skipped["verified"] and skipped["checks"]["full_size"].startswith("not tried: about ")
    assert "full size" not in [shape["label"] for shape in skipped["shapes"]]


def test_inputs_that_cannot_be_laid_out_another_way_are_said_not_tried(verify, monkeypatch):
    monkeypatch.setattr(judge, "_non_contiguous", lambda value: value)  # every layout the same as drawn
    result = verify("good")
    assert result["verified"] and result["checks"]["strided_inputs"] == "not tried: no input can be laid out another way"
    assert "strided" not in [shape["label"] for shape in result["shapes"]]


@pytest.mark.parametrize(
    ("task", "skipped"),
    [
        ("task_masked_nll", "instance other int constructor values (-1->0): skipped, the reference rejects it ("),
        ("task_masked_nll_argument", "call pad_id=0: skipped, the reference rejects it ("),
    ],
)
def test_a_variant_the_reference_fails_on_index_inputs_is_skipped_without_running_it_on_the_device(
    verify, monkeypatch, task, skipped
):
    # on a GPU an out-of-range index (pad_id -1 -> 0 lets the padding's -1 through to gather) fails a device assert,
    # after which every CUDA call of the judge's process fails: on the H200, the strided trial after the other
    # instances. Here a reference run that fails on index inputs breaks every later one alike.
    monkeypatch.setattr(judge, "_index_errors_ruin_the_process", lambda device: True)
    reference_outputs = judge.Judge._reference_outputs
    ruined = []

    def as_on_a_gpu(self, call, *args, **kwargs):
        if ruined:
            raise RuntimeError("CUDA error: device-side assert triggered")
        try:
            return reference_outputs(self, call, *args, **kwargs)
        except judge.ReferenceFailed:
            if judge._has_index_inputs([*call.args, *call.kwargs.values()]):
                ruined.append(call)
            raise

    monkeypatch.setattr(judge.Judge, "_reference_outputs", as_on_a_gpu)
    result = verify("masked_nll", task=task)
    assert result["verified"], result["detail"]
    [note] = [note for note in result["checks"]["other_instances_and_calls"] if "skipped" in note]
    assert note.startswith(skipped) and "index -1 is out of bounds" in note
    assert result["checks"]["strided_inputs"] == "tried (transposed or strided views of the inputs)"
    assert not ruined
