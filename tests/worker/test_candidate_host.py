"""The candidate's process, from its side: what it reports about outputs and inputs, how it names the candidate's
failures, the user's precision settings it applies, and a protocol stream the candidate cannot write into.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch

from drtriton_lsp.worker.candidate_host import _apply_precision, _classify, _describe_output, _identical


def test_outputs_are_described_plain_tensors_and_values_only():
    assert _describe_output(torch.zeros(2, 3)) == {"kind": "tensor", "shape": [2, 3], "dtype": "float32"}
    assert _describe_output(3) == {"kind": "value", "value": 3}
    assert _describe_output(None) == {"kind": "value", "value": None}
    subclass = torch.nn.Parameter(torch.zeros(2))  # a tensor subclass could compute itself later
    assert _describe_output(subclass) == {"kind": "unsupported", "type": "a Parameter (a torch.Tensor subclass)"}
    assert _describe_output("text") == {"kind": "unsupported", "type": "a str"}


def test_an_input_is_unchanged_only_with_the_same_shape_dtype_and_values_nan_included():
    before = torch.tensor([1.0, float("nan"), 3.0])
    assert _identical(before, before.clone())
    assert not _identical(before, torch.tensor([1.0, 0.5, 3.0]))  # a NaN overwritten with 0.5
    assert not _identical(before, before[:2].clone())  # resized in place
    assert not _identical(before, before.double())
    assert not _identical(torch.tensor([1, 2]), torch.tensor([1, 3]))


class CompilationError(Exception):
    """Named as Triton names its compiler's errors."""


def test_the_candidates_failures_are_named_by_kind():
    assert _classify(RuntimeError("CUDA error: an illegal memory access was encountered")) == "device_fault"
    assert _classify(CompilationError("at 3:4: unsupported")) == "compile_error"
    assert _classify(ValueError("bad shape")) == "runtime_error"


def test_the_users_float32_precision_settings_are_applied(monkeypatch):
    monkeypatch.setattr(torch.backends.cuda.matmul, "allow_tf32", torch.backends.cuda.matmul.allow_tf32)
    monkeypatch.setattr(torch.backends.cudnn, "allow_tf32", torch.backends.cudnn.allow_tf32)
    precision = torch.get_float32_matmul_precision()
    try:
        _apply_precision({"matmul_allow_tf32": True, "cudnn_allow_tf32": False, "float32_matmul_precision": "medium"})
        assert torch.backends.cuda.matmul.allow_tf32 is True and torch.backends.cudnn.allow_tf32 is False
        assert torch.get_float32_matmul_precision() == "medium"
        _apply_precision({})  # nothing said, nothing changed
        assert torch.backends.cudnn.allow_tf32 is False
    finally:
        torch.set_float32_matmul_precision(precision)


@pytest.mark.slow
def test_what_the_candidate_prints_never_reaches_the_judges_protocol_stream(tmp_path):
    forged = '{"id": 1, "result": {"weights": "copied from the reference"}}'
    # a forged answer, printed at import and written to file descriptor 1 (the static policy refuses `os`; this
    # process must not rely on that)
    printing = f"import os\nprint({forged!r})\nos.write(1, ({forged!r} + '\\n').encode())\n"
    (tmp_path / "candidate.py").write_text(printing)
    torch.save([], tmp_path / "init.pt")
    torch.save({}, tmp_path / "state.pt")
    load = {"id": 1, "op": "load", "source": "candidate.py", "init": "init.pt", "init_seed": 1,
            "device": "cpu"}
    finished = subprocess.run(
        [sys.executable, "-m", "drtriton_lsp.worker.candidate_host", str(tmp_path)],
        input=json.dumps(load) + "\n" + json.dumps({"op": "exit"}) + "\n", capture_output=True, text=True, timeout=120,
    )
    assert finished.returncode == 0, finished.stderr
    said = [json.loads(line) for line in finished.stdout.splitlines()]
    refusal = {"kind": "no_model_new", "message": "the candidate defines no ModelNew"}
    assert said == [{"event": "ready"}, {"id": 1, "error": refusal}]
    assert finished.stderr.count(forged) == 2
