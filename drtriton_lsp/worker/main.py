"""`drtriton worker`: the process that runs user and generated code, answering JSON-RPC on stdio.

Methods: capabilities, capture, verify, benchmark, time_candidates, ceilings, sample_model, preload, shutdown. Anything
the code under test prints goes to stderr: file descriptor 1 is moved aside at start-up so only
protocol messages reach the caller, even when a kernel or the user's module writes to stdout.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any, Callable, NoReturn

from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners import lifetime, protocol

Progress = Callable[[str], None]

# Each method imports its job's module when called, not at start-up: torch loads only after `preload` has started the
# candidate's interpreters (worker/candidate_process.py is torch-free), which import it at the same time.

def capabilities(_params: dict[str, Any], _progress: Progress) -> dict[str, Any]:
    from drtriton_lsp.worker.devices import describe_devices

    return {"protocol": protocol.PROTOCOL_VERSION, "methods": sorted(METHODS), **describe_devices()}


def capture(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    from drtriton_lsp.worker.capture_job import run_capture

    return run_capture(params, progress)


def verify(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    from drtriton_lsp.worker.judge import run_verification

    return run_verification(params, progress)


def benchmark(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    from drtriton_lsp.worker.benchmark import run_benchmark

    return run_benchmark(params, progress)


def time_candidates(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    from drtriton_lsp.worker.benchmark import run_candidate_timing

    return run_candidate_timing(params, progress)


def ceilings(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    from drtriton_lsp.worker.ceilings import run_ceilings

    return run_ceilings(params, progress)


def sample_model(params: dict[str, Any], progress: Progress) -> dict[str, Any]:
    from drtriton_lsp.models.sampling_job import run_sampling

    return run_sampling(params, progress)


def _warm_up_export() -> None:
    """Import torch.export's tracer, which pulls in TorchDynamo (seconds: most of a capture's time on a cold
    worker), and export a two-op module with a dynamic dim once, which settles the tracer's first-call work."""
    import torch

    class TwoOps(torch.nn.Module):
        def forward(self, x):
            return torch.relu(x) + 1

    dynamic = ({0: torch.export.Dim.AUTO},)
    torch.export.export(TwoOps(), (torch.randn(4, 8),), dynamic_shapes=dynamic, strict=False)


# What only one job method needs, and is worth doing ahead when the spare is known to be for it.
METHOD_PRELOADS: dict[str, Callable[[], None]] = {"capture": _warm_up_export}


def preload(params: dict[str, Any], _progress: Progress) -> dict[str, Any]:
    """Import what the job methods import, and create the CUDA context where this worker's jobs use CUDA: a
    worker started ahead of its job (`LocalRunner.prepare`) pays its start-up while an earlier step runs.
    params: `method`, the job the worker is for when known (see METHOD_PRELOADS)."""
    if params.get("method") == "verify":
        # the candidate's interpreters import torch and Triton (seconds) at the same time as this one does
        from drtriton_lsp.worker.candidate_process import processes_for_device, start_ahead

        start_ahead(processes_for_device("cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"))
    import torch
    import triton  # noqa: F401

    from drtriton_lsp.worker import benchmark as benchmark_job, capture_job, ceilings, judge  # noqa: F401

    warm_up = METHOD_PRELOADS.get(params.get("method"))
    if warm_up is not None:
        warm_up()

    # TRITON_INTERPRET=1 is the CPU environment: its jobs never touch the GPU, so no context is made for them.
    cuda = os.environ.get("TRITON_INTERPRET") != "1" and torch.cuda.is_available()
    if cuda:
        torch.cuda.synchronize()  # creates the context; allocates nothing through PyTorch's caching allocator
    return {"cuda_context": cuda}


METHODS: dict[str, Callable[[dict[str, Any], Progress], Any]] = {
    "capabilities": capabilities,
    "capture": capture,
    "verify": verify,
    "benchmark": benchmark,
    "time_candidates": time_candidates,
    "ceilings": ceilings,
    "sample_model": sample_model,
    "preload": preload,
}


def serve(protocol_out) -> int:
    """Answer requests from stdin until `shutdown` or end of input."""
    while True:
        message = protocol.read_message(sys.stdin)
        if message is None:
            return 0
        request_id = message.get("id")
        method = message.get("method")
        if method == "shutdown":
            protocol.write_message(protocol_out, protocol.result_response(request_id, None))
            return 0
        handler = METHODS.get(method)
        if handler is None:
            protocol.write_message(
                protocol_out,
                protocol.error_response(request_id, protocol.METHOD_NOT_FOUND, f"unknown method {method!r}"),
            )
            continue

        def progress(text: str, _id=request_id) -> None:
            protocol.write_message(protocol_out, protocol.notification("progress", {"id": _id, "message": text}))

        try:
            result = handler(message.get("params") or {}, progress)
            response = protocol.result_response(request_id, result)
        except DrtritonError as error:
            response = protocol.error_response(request_id, protocol.USER_ERROR, error.message, error.to_json())
        except Exception as error:  # noqa: BLE001 - reported to the caller, which decides
            response = protocol.error_response(
                request_id,
                protocol.INTERNAL_ERROR,
                f"{type(error).__name__}: {error}",
                {"traceback": traceback.format_exc()},
            )
        protocol.write_message(protocol_out, response)


def keep_to_given_cpus() -> None:
    """Run on the CPUs $DRTRITON_CPUS names, when it names some (`bench --jobs N`): the processes this worker starts
    (the candidate's, torch.compile's compile workers) inherit them, and the numerical libraries' thread pools were
    sized to them in the environment this worker was started with."""
    cpus = os.environ.get(protocol.CPU_SET_VARIABLE)
    if cpus:
        os.sched_setaffinity(0, {int(cpu) for cpu in cpus.split(",")})


def main() -> int:
    lifetime.end_with_parent()  # before any job: a worker never outlives the process that started it
    keep_to_given_cpus()
    # Keep the real stdout for protocol messages; point fd 1 (Python and C code alike) at stderr.
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    protocol_out = os.fdopen(protocol_fd, "w", buffering=1)
    sys.stdout = sys.stderr
    return serve(protocol_out)


def exit_now(status: int) -> NoReturn:
    """End the process without the interpreter's teardown, which takes seconds once torch and TorchDynamo are
    loaded (2.4 s measured on the CPU machine), while the runner waits for the exit: the answers are written
    and flushed, and this process's children are killed first: what the job started (torch.compile's compile
    workers) and the group guard of runners.lifetime."""
    import psutil

    sys.stderr.flush()
    for child in psutil.Process().children(recursive=True):
        try:
            child.kill()
        except psutil.NoSuchProcess:
            pass
    os._exit(status)


if __name__ == "__main__":
    exit_now(main())
