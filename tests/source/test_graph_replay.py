"""The written dispatch's CUDA-graph replay (`replay=True`): same results as the plain forward, call after call.

On the CPU, the kinds of call that may be a graph's and the interpreter's plain path; on a GPU (marked), a real
Triton forward replayed: other values, a parameter changed in place or replaced, outputs never reused, the switch.
"""

import warnings

import pytest

from drtriton_lsp.source.dispatch import DISPATCH_HELPER, declares_replay, render_specialization
from drtriton_lsp.task import load_module_from_source

torch = pytest.importorskip("torch")

GUARDS = [
    {"kind": "parameter", "name": "weight", "dtype": "float32", "shape": [64]},
    {"kind": "tensor", "name": "x", "dtype": "float32", "shape": [None, 64]},
]

USER_FILE = '''
{helper}

{guards}

FORWARD_CALLS = []


if triton is not None:

    @triton.jit
    def scaled_shift_kernel(x_ptr, weight_ptr, out_ptr, n, width, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        x = tl.load(x_ptr + offsets, mask=mask)
        weight = tl.load(weight_ptr + offsets % width, mask=mask)
        tl.store(out_ptr + offsets, x * weight + 1.0, mask=mask)


def shift_triton_forward(self, x, *, drtriton_module_tensors):
    FORWARD_CALLS.append(x.shape)
    x = x.contiguous()  # the kernel reads flat offsets
    out = torch.empty_like(x)
    weight = drtriton_module_tensors["weight"]
    scaled_shift_kernel[(triton.cdiv(x.numel(), 256),)](x, weight, out, x.numel(), x.shape[-1], BLOCK=256)
    return out, x.shape[0]


class Shift(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(64) + 0.5)

    @drtriton_dispatch(shift_triton_forward, SHIFT_SPECIALIZATION, replay=True)
    def forward(self, x):
        return x * self.weight + 1.0, x.shape[0]
'''


def user_module(directory, name: str):
    source = USER_FILE.format(helper=DISPATCH_HELPER, guards=render_specialization("SHIFT_SPECIALIZATION", GUARDS))
    assert declares_replay(source) and not declares_replay(source.replace("replay=True", "replay=False"))
    return load_module_from_source(source, name, directory)


def test_the_kinds_of_call_a_graph_may_replay(tmp_path):
    kind = user_module(tmp_path, "replay_kinds").DrtritonGraphReplay.kind
    weight, x = torch.ones(64), torch.randn(4, 64)

    key = kind([weight], [x, 2.0, None])
    assert key == kind([weight], [torch.randn(4, 64), 2.0, None])  # other values, the same kind
    assert key != kind([torch.ones(64)], [x, 2.0, None])  # a replaced parameter (another address)
    assert key != kind([weight], [torch.randn(5, 64), 2.0, None]) and key != kind([weight], [x, 3.0, None])
    assert kind([weight], [torch.randn(64, 4).mT]) is None  # a strided input is copied by no graph
    assert kind([weight], [torch.randn(2, 3, 4, 5).to(memory_format=torch.channels_last)]) is not None
    assert kind([weight], [x, [1, 2]]) is None  # a value a key cannot hold


def test_under_the_interpreter_the_forward_runs_plainly(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    user = user_module(tmp_path, "replay_interpreted")
    model = user.Shift()
    with torch.no_grad():
        results = [model(torch.randn(3, 64)) for _ in range(3)]
    assert len(user.FORWARD_CALLS) == 3  # each call its own forward: no graph
    assert all(count == 3 for _, count in results)


@pytest.fixture
def replayed(tmp_path, monkeypatch):
    """The user's module on the GPU, with the CUDA graphs it replays counted."""
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv("DRTRITON_CUDA_GRAPHS", raising=False)
    user = user_module(tmp_path, f"replay_{tmp_path.name}")
    replays = []
    replay = torch.cuda.CUDAGraph.replay
    monkeypatch.setattr(torch.cuda.CUDAGraph, "replay", lambda graph: (replays.append(1), replay(graph))[1])
    return user, replays


def expected(model, x):
    return x * model.weight.detach() + 1.0


def close(out, want):
    """Equal but for the rounding of a fused multiply-add."""
    return torch.allclose(out, want, rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
def test_replayed_calls_compute_each_call_and_never_reuse_an_output(replayed):
    user, replays = replayed
    model = user.Shift().cuda()
    inputs = [torch.randn(8, 64, device="cuda") for _ in range(4)]
    with torch.no_grad():
        results = [model(x) for x in inputs]
    for x, (out, rows) in zip(inputs, results):
        assert rows == 8 and close(out, expected(model, x))  # the first call's output still holds its values
    # the first call: plain run, side-stream warm-up, capture (3 forwards); then only replays
    assert len(user.FORWARD_CALLS) == 3 and len(replays) == 4
    assert len({out.data_ptr() for out, _ in results}) == 4


@pytest.mark.gpu
def test_a_parameter_changed_in_place_is_read_and_one_replaced_is_a_new_graph(replayed):
    user, _ = replayed
    model = user.Shift().cuda()
    x = torch.randn(8, 64, device="cuda")
    with torch.no_grad():
        model(x), model(x)
        model.weight.mul_(3.0)
        changed, _ = model(x)  # a replay: the graph reads the parameter's memory
        assert close(changed, expected(model, x))
        captures = len(user.FORWARD_CALLS)
        model.weight = torch.nn.Parameter(torch.rand(64, device="cuda"))
        replaced, _ = model(x)
    assert close(replaced, expected(model, x))
    assert len(user.FORWARD_CALLS) == captures + 3  # the replaced parameter: a capture of its own


@pytest.mark.gpu
def test_inputs_refilled_in_place_are_read_where_they_lie_and_other_memory_is_copied(replayed, monkeypatch):
    user, replays = replayed
    model = user.Shift().cuda()
    copies = []
    copy = torch.Tensor.copy_
    monkeypatch.setattr(torch.Tensor, "copy_", lambda tensor, *args, **kwargs: (copies.append(1), copy(tensor, *args, **kwargs))[1])
    x = torch.randn(8, 64, device="cuda")
    with torch.no_grad():
        model(x)  # the first call: a graph reading copies of the inputs
        model(x)  # the same memory again: a second graph, reading it where it lies
        assert len(user.FORWARD_CALLS) == 6
        before = len(copies)
        for _ in range(3):
            x.copy_(torch.randn(8, 64, device="cuda"))  # new values in the same memory
            out, _ = model(x)
            assert close(out, expected(model, x))
        assert len(copies) == before + 3 and len(user.FORWARD_CALLS) == 6  # only the refills copied
        other = torch.randn(8, 64, device="cuda")
        out, _ = model(other)  # other memory: the first graph, the input copied into it
    assert close(out, expected(model, other)) and len(copies) == before + 4 and len(user.FORWARD_CALLS) == 6


@pytest.mark.gpu
def test_a_forward_that_writes_its_input_runs_plainly_and_writes_the_callers_tensor_once_a_call(replayed):
    # its capture reads copies of the inputs, which the warm-up and the check's replay write again: the replay differs
    # from the plain run, so no graph is kept, and none ever reads the caller's memory
    user, replays = replayed
    original = user.shift_triton_forward

    def writing_forward(self, x, *, drtriton_module_tensors):
        x.mul_(1.5)
        return original(self, x, drtriton_module_tensors=drtriton_module_tensors)

    model = user.Shift().cuda()
    forward = user.drtriton_dispatch(writing_forward, user.SHIFT_SPECIALIZATION, replay=True)(type(model).forward.reference)
    x = torch.randn(8, 64, device="cuda")
    start = x.clone()
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        outputs = [forward(model, x)[0] for _ in range(3)]
    assert torch.allclose(x, start * 1.5**3) and close(outputs[-1], expected(model, x))
    assert len(user.FORWARD_CALLS) == 5 and len(replays) == 1  # the capture's three forwards, then two plain calls
    assert len([w for w in caught if "differed from the plain run" in str(w.message)]) == 1


@pytest.mark.gpu
def test_other_sizes_strided_inputs_and_the_switch_run_as_they_should(replayed, monkeypatch):
    user, replays = replayed
    model = user.Shift().cuda()
    with torch.no_grad():
        model(torch.randn(8, 64, device="cuda"))
        strided = torch.randn(64, 8, device="cuda").mT
        out, _ = model(strided)  # no graph copies a strided input: a plain forward
        assert close(out, expected(model, strided)) and len(replays) == 1
        monkeypatch.setenv("DRTRITON_CUDA_GRAPHS", "0")
        before = len(user.FORWARD_CALLS)
        out, _ = model(torch.randn(8, 64, device="cuda"))
        assert len(user.FORWARD_CALLS) == before + 1 and len(replays) == 1
        monkeypatch.delenv("DRTRITON_CUDA_GRAPHS")
        other = torch.randn(5, 64, device="cuda")
        out, rows = model(other)  # another size: a graph of its own
    assert rows == 5 and close(out, expected(model, other)) and len(replays) == 2


@pytest.mark.gpu
def test_a_forward_that_cannot_be_captured_runs_plainly_and_says_so_once(replayed):
    user, replays = replayed
    original = user.shift_triton_forward

    def syncing_forward(self, x, *, drtriton_module_tensors):
        out, rows = original(self, x, drtriton_module_tensors=drtriton_module_tensors)
        return out * float(out.abs().max() > -1), rows  # a host read of device data: no capture allows it

    model = user.Shift().cuda()
    dispatch = type(model).forward
    model_forward = user.drtriton_dispatch(syncing_forward, user.SHIFT_SPECIALIZATION, replay=True)(dispatch.reference)
    x = torch.randn(8, 64, device="cuda")
    with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        results = [model_forward(model, x) for _ in range(3)]
    assert all(close(out, expected(model, x)) for out, _ in results) and replays == []
    assert len([w for w in caught if "not replayed as a CUDA graph" in str(w.message)]) == 1


DEEP_STACK = '''
import torch
from torch import nn


class Model(nn.Module):
    """Eight linear layers, each with its activation: eight kernels, so the default schedule replays them."""

    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(64, 64) for _ in range(8))

    def forward(self, x):
        for layer in self.layers:
            x = torch.tanh(layer(x)) * 2.0
        return x


def get_inputs():
    return [torch.randn(32, 64)]


def get_init_inputs():
    return []
'''


@pytest.mark.gpu
def test_the_verifier_checks_a_replaying_dispatch_with_its_replay_on(tmp_path):
    import json
    import subprocess
    import sys

    task = tmp_path / "deep_stack.py"
    task.write_text(DEEP_STACK)
    report_path = tmp_path / "report.json"
    finished = subprocess.run(
        [sys.executable, "-m", "drtriton_lsp.cli", "optimize", str(task), "--device", "cuda", "--trials", "3",
         "--json", str(report_path)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    report = json.loads(report_path.read_text())
    assert report["status"] == "verified", finished.stderr[-2000:]
    assert "replay=True" in report["kernel"]["source"] and report["kernel"]["source"].count("replay cuda_graph")
    check = report["correctness"]["checks"]["graph_replay"]
    assert check.startswith("tried") and " 0 graph replays" not in check, check
    assert any(shape["label"].startswith("replay") for shape in report["correctness"]["shapes"])
