"""The local runner's worker protocol: one answer per request, progress on the side, failures named.

Each test starts a real `drtriton worker` process.
"""

from __future__ import annotations

import io
import threading

import pytest

from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.runners import protocol
from drtriton_lsp.runners.local import JobFailure, JobLimits, LocalRunner


def test_capabilities_reports_devices_and_methods():
    answer = LocalRunner().call("capabilities", {})
    assert answer["protocol"] == protocol.PROTOCOL_VERSION
    assert {"capture", "verify", "benchmark", "capabilities"} <= set(answer["methods"])
    assert answer["versions"]["torch"] and answer["cuda_available"] in (True, False)


def test_an_unknown_method_is_an_internal_error_not_a_hang():
    with pytest.raises(DrtritonError, match="unknown method"):
        LocalRunner().call("no_such_method", {})


def test_cancelling_kills_the_worker_promptly():
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(JobFailure) as caught:
        LocalRunner().call("capabilities", {}, limits=JobLimits(timeout_s=60), cancel=cancel)
    assert caught.value.reason == "cancelled"


def test_messages_are_one_json_object_per_line():
    stream = io.StringIO()
    protocol.write_message(stream, protocol.request(1, "verify", {"a": "line\nbreak"}))
    protocol.write_message(stream, protocol.notification("progress", {"message": "x"}))
    stream.seek(0)
    assert protocol.read_message(stream)["params"] == {"a": "line\nbreak"}
    assert protocol.read_message(stream)["method"] == "progress"
    assert protocol.read_message(stream) is None
