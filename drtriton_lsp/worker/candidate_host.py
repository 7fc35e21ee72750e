"""The candidate's process: a clean interpreter that imports one candidate and runs it on inputs the judge drew.

It never sees the task, the reference, the seeds or the tolerances; it answers the judge's requests (JSON lines on
stdin/stdout, tensors in files of the judge's exchange folder) with outputs and what it observed: launches, the
PyTorch ops the forward ran, broken guard regions, changed inputs. The judge decides; nothing here is a verdict.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import time
import traceback
from pathlib import Path
from typing import Any, Callable

import torch

from drtriton_lsp.task import load_module_from_source
from drtriton_lsp.worker.candidate_process import REPLAY_SWITCH
from drtriton_lsp.worker.op_audit import CandidateAudit, GuardedBuffer, guarded_buffer
from drtriton_lsp.worker.tensor_exchange import deliver, flat_values, unshare
from drtriton_lsp.worker.triton_launches import LaunchCounter

CANDIDATE_MODULE = "drtriton_candidate"
ERROR_TEXT_LIMIT = 2000


class CandidateFailed(Exception):
    """The candidate's own code failed: `kind` is a rejection reason (import_error, runtime_error, ...)."""

    def __init__(self, kind: str, message: str):
        super().__init__(message)
        self.kind = kind


class Host:
    """The candidate module, the instances built from it, and the buffers of the last call."""

    def __init__(self, exchange: Path, send: Callable[[dict[str, Any]], None]):
        self.exchange = exchange
        self.send = send
        self.module = None
        self.device = torch.device("cpu")
        self.instances: dict[str, torch.nn.Module] = {}
        self.counter = LaunchCounter()
        self.placed: list[Any] = []  # the last call's arguments, on the device
        self.placed_buffers: list[GuardedBuffer] = []
        self.kept_outputs: list[Any] = []
        self._watch_compiles()
        # counting from start-up, before any candidate is imported: it never sees Triton unpatched
        self.counter.install()

    # requests

    def load(self, request: dict[str, Any]) -> dict[str, Any]:
        self.device = torch.device(request["device"])
        _apply_precision(request.get("precision") or {})
        source = self._file(request["source"]).read_text()
        try:
            self.module = load_module_from_source(source, CANDIDATE_MODULE, self.exchange / "module")
        except Exception as error:  # noqa: BLE001 - any import failure is the candidate's
            raise CandidateFailed("import_error", _describe(error)) from error
        if not hasattr(self.module, "ModelNew"):
            raise CandidateFailed("no_model_new", "the candidate defines no ModelNew")
        return {**self.instance({**request, "name": "primary"}), "ipc_probe_sum": _probe_sum(request.get("ipc_probe"))}

    def instance(self, request: dict[str, Any]) -> dict[str, Any]:
        """Build ModelNew(*init) under the judge's seed as instance `name`; with `state`, load its weights too."""
        init = torch.load(self._file(request["init"]), weights_only=False)
        torch.manual_seed(int(request["init_seed"]))
        try:
            model = self.module.ModelNew(*init).eval().to(self.device)
        except Exception as error:  # noqa: BLE001 - the candidate's constructor failed
            raise CandidateFailed("runtime_error", f"ModelNew(*init) raised {_describe(error)}") from error
        finally:
            torch.seed()  # from here on the candidate's RNG state is as unpredictable as in anyone's process
        self.instances[request["name"]] = model
        return self.weights(request) if "state" in request else {}

    def weights(self, request: dict[str, Any]) -> dict[str, Any]:
        """Load the reference's weights (`state`) into instance `name`, where ModelNew's parameters match Model's."""
        state = torch.load(self._file(request["state"]), weights_only=False)
        try:
            self.instances[request["name"]].load_state_dict(state, strict=True)
            return {"weights": "copied from the reference"}
        except RuntimeError:
            return {"weights": "seeded initialisation (ModelNew's parameters differ from Model's)"}

    def call(self, request: dict[str, Any]) -> dict[str, Any]:
        model = self.instances[request["instance"]]
        if request.get("inputs_shared"):
            payload = unshare(request["inputs_shared"])
        else:
            payload = torch.load(self._file(request["inputs"]), weights_only=False)
        names = list(payload.get("kwargs", {}))
        values = list(payload["args"]) + [payload["kwargs"][name] for name in names]
        if request.get("reuse_buffers") and len(self.placed) == len(values):
            placed = self._refill(values)
        else:
            self.placed_buffers = []
            placed = self._place(values)
        self.placed = placed
        arguments = placed[: len(payload["args"])]
        keywords = dict(zip(names, placed[len(payload["args"]):]))
        pristine = [value.clone() if isinstance(value, torch.Tensor) else None for value in placed]
        audit = CandidateAudit(
            poison_seed=int(request.get("poison_seed", 0)),
            track_triton_values=bool(request.get("audit")),
        )
        self.counter.reset()
        self.counter.audit = audit
        replays = ReplayCounter()
        started = time.monotonic()
        try:
            skipping = self.counter.skipping() if request.get("skip_launches") else contextlib.nullcontext()
            autograd = torch.enable_grad() if request.get("autograd") else torch.no_grad()
            # a replay call runs outside the audit (whose guarded allocations a capture would record): the same
            # calls were audited with the replay off
            watched = replays.counting() if request.get("replay") else audit
            with autograd, skipping:
                with watched:
                    output = model(*arguments, **keywords)
                _synchronize(self.device)
        except Exception as error:  # noqa: BLE001 - any exception is the candidate's, with its kind
            raise CandidateFailed(_classify(error), _describe(error)) from error
        finally:
            self.counter.audit = None
        seconds = time.monotonic() - started
        outputs = flat_values(output)
        described = [_describe_output(value) for value in outputs]
        plain = all(item["kind"] != "unsupported" for item in described)
        if request.get("receptacles"):
            deliver(outputs, unshare(request["receptacles"]))
            if request.get("recheck") and self.kept_outputs:
                deliver(self.kept_outputs, unshare(request["recheck_receptacles"]))
        else:
            if plain:
                torch.save([_to_host(value) for value in outputs], self._file(request["outputs"]))
            if request.get("recheck") and self.kept_outputs:
                torch.save([_to_host(value) for value in self.kept_outputs], self._file(request["recheck_to"]))
        if request.get("keep"):
            self.kept_outputs = outputs
        return {
            "outputs": described,
            "launches": self.counter.total,
            "kernels": dict(self.counter.by_kernel),
            "torch_ops": dict(audit.compute_ops),
            "outputs_hold_triton_values": [
                isinstance(value, torch.Tensor) and audit.holds_triton_values(value) for value in outputs
            ],
            "outputs_computed_here": [
                isinstance(value, torch.Tensor) and audit.holds_computed_values(value) for value in outputs
            ],
            "broken_guards": audit.broken_guards() + [buffer.description for buffer in self.placed_buffers
                                                      if not buffer.intact()],
            "graph_replays": replays.total,
            "modified_inputs": [
                index for index, (before, after) in enumerate(zip(pristine, placed))
                if before is not None and not _identical(before, after)
            ],
            "seconds": seconds,
        }

    # helpers

    def _file(self, name: str) -> Path:
        """A file of the exchange folder (names only: the judge never sends paths outside it)."""
        return self.exchange / Path(name).name

    def _place(self, values: list[Any]) -> list[Any]:
        """Each tensor copied to the device with its exact layout (size, strides) inside a guarded buffer."""
        placed = []
        for index, value in enumerate(values):
            if isinstance(value, torch.Tensor):
                target = guarded_buffer(
                    tuple(value.shape), tuple(value.stride()), value.dtype, self.device,
                    f"input {index} {list(value.shape)} {value.dtype}", self.placed_buffers,
                )
                target.copy_(value)
                placed.append(target)
            else:
                placed.append(value)
        return placed

    def _refill(self, values: list[Any]) -> list[Any]:
        """New values written into the last call's own buffers (same addresses): results cached by address go stale."""
        for index, (buffer, value) in enumerate(zip(self.placed, values)):
            if isinstance(buffer, torch.Tensor) and isinstance(value, torch.Tensor) and buffer.shape == value.shape:
                buffer.copy_(value)
            else:
                self.placed[index] = self._place([value])[0]
        return self.placed

    def _watch_compiles(self) -> None:
        """Tell the judge when Triton compiles, so compile time is not counted against a call's time limit."""
        from triton.runtime.jit import JITFunction

        compile_kernel = getattr(JITFunction, "_do_compile", None)
        if compile_kernel is None:
            return
        send = self.send

        def announced(kernel, *args, **kwargs):
            send({"event": "compiling"})
            try:
                return compile_kernel(kernel, *args, **kwargs)
            finally:
                send({"event": "compiled"})

        JITFunction._do_compile = announced


class ReplayCounter:
    """Counts the CUDA graphs replayed inside `counting()`, with a written-back dispatch's replay switched on there."""

    def __init__(self) -> None:
        self.total = 0

    @contextlib.contextmanager
    def counting(self):
        replay = torch.cuda.CUDAGraph.replay

        def counted(graph) -> None:
            self.total += 1
            replay(graph)

        torch.cuda.CUDAGraph.replay = counted
        os.environ[REPLAY_SWITCH] = "1"
        try:
            yield
        finally:
            os.environ[REPLAY_SWITCH] = "0"
            torch.cuda.CUDAGraph.replay = replay


def _probe_sum(probe: str | None) -> int | None:
    """The sum of the judge's probe tensor read through CUDA IPC, or None where sharing GPU memory fails here."""
    if not probe:
        return None
    try:
        return int(unshare(probe).sum())
    except Exception:  # noqa: BLE001 - a sandbox without CUDA IPC: the judge falls back to files
        return None


def _apply_precision(precision: dict[str, Any]) -> None:
    """The user's float32 precision settings, so the candidate's PyTorch ops run as the user's would."""
    if "matmul_allow_tf32" in precision:
        torch.backends.cuda.matmul.allow_tf32 = bool(precision["matmul_allow_tf32"])
    if "cudnn_allow_tf32" in precision:
        torch.backends.cudnn.allow_tf32 = bool(precision["cudnn_allow_tf32"])
    if "float32_matmul_precision" in precision:
        torch.set_float32_matmul_precision(precision["float32_matmul_precision"])


def _describe_output(value: Any) -> dict[str, Any]:
    if type(value) is torch.Tensor:
        return {"kind": "tensor", "shape": list(value.shape), "dtype": str(value.dtype).removeprefix("torch.")}
    if isinstance(value, torch.Tensor):
        return {"kind": "unsupported", "type": f"a {type(value).__name__} (a torch.Tensor subclass)"}
    if value is None or isinstance(value, (bool, int, float)):
        return {"kind": "value", "value": value}
    return {"kind": "unsupported", "type": f"a {type(value).__name__}"}


def _to_host(value: Any) -> Any:
    return value.detach().to("cpu", copy=True) if isinstance(value, torch.Tensor) else value


def _identical(before: torch.Tensor, after: torch.Tensor) -> bool:
    if before.shape != after.shape or before.dtype != after.dtype:
        return False
    if before.is_floating_point():
        return bool(torch.equal(before.isnan(), after.isnan())) and bool(
            torch.equal(torch.nan_to_num(before, nan=0.5), torch.nan_to_num(after, nan=0.5))
        )
    return bool(torch.equal(before, after))


def _synchronize(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _classify(error: BaseException) -> str:
    name = type(error).__name__
    if "CUDA error" in str(error) or name == "AcceleratorError":
        return "device_fault"
    if "Compilation" in name or "triton" in type(error).__module__:
        return "compile_error"
    return "runtime_error"


def _describe(error: BaseException) -> str:
    return f"{type(error).__name__}: {error}"[:ERROR_TEXT_LIMIT]


def serve(exchange: Path, protocol_out) -> None:
    """Answer the judge's requests until `exit` or end of input."""

    def send(message: dict[str, Any]) -> None:
        protocol_out.write(json.dumps(message, separators=(",", ":")) + "\n")
        protocol_out.flush()

    host = Host(exchange, send)
    handlers = {"load": host.load, "instance": host.instance, "weights": host.weights, "call": host.call}
    send({"event": "ready"})
    for line in sys.stdin:
        request = json.loads(line)
        if request["op"] == "exit":
            return
        try:
            send({"id": request["id"], "result": handlers[request["op"]](request)})
        except CandidateFailed as failure:
            send({"id": request["id"], "error": {"kind": failure.kind, "message": str(failure)}})
        except Exception as error:  # noqa: BLE001 - anything else is still the candidate's doing (or its effect)
            send({"id": request["id"], "error": {"kind": _classify(error), "message": _describe(error),
                                                 "traceback": traceback.format_exc()[-ERROR_TEXT_LIMIT:]}})


def main() -> None:
    # Protocol messages go to the judge on the real stdout; fd 1 (what the candidate prints) goes to stderr.
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    protocol_out = os.fdopen(protocol_fd, "w", buffering=1)
    sys.stdout = sys.stderr
    serve(Path(sys.argv[1]), protocol_out)
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
