"""drtriton.printDebugInformation: versions, settings, devices and worker status, returned and logged.

What a user pastes into a bug report: every part must be there and true of the running server.
"""

from __future__ import annotations

import dataclasses
import json
import platform
from importlib.metadata import version

import psutil
import pytest
from lsp_helpers import TEST_SETTINGS, execute, open_file, wait_for_job_end, wait_until
from lsprotocol import types

import drtriton_lsp
from drtriton_lsp.models.settings import ModelSettings

DEFAULT_MODEL = dataclasses.asdict(ModelSettings())

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]  # a worker reports the devices (it imports torch)


async def test_debug_information_names_versions_settings_devices_and_workers(client, example_file):
    uri = open_file(client, example_file())
    started = await execute(client, "drtriton.generate", {"uri": uri, "target": "ScaledActivation"})
    await execute(client, "drtriton.cancel", started["jobId"])
    end = await wait_for_job_end(client, started["token"], timeout_s=60)

    text = await execute(client, "drtriton.printDebugInformation")
    information = json.loads(text)
    assert information["versions"] == {
        "drtriton-lsp": drtriton_lsp.__version__,
        "pygls": version("pygls"),
        "lsprotocol": version("lsprotocol"),
        "python": platform.python_version(),
    }
    assert information["settings"] == {
        **TEST_SETTINGS, "remote": "", "remotePython": "python3", "onSave": "hint", "writeTests": False,
        "writeBack": "inline", "model": DEFAULT_MODEL,
    }  # fmt: skip
    assert information["model"] == {
        "backend": "none", "answers": False, "problem": "no model: drtriton.model.backend is none"
    }
    assert information["remote"] is None  # jobs run on this machine
    devices = information["devices"]
    assert isinstance(devices["cuda_available"], bool) and devices["cpu_name"]
    assert devices["versions"]["torch"] == version("torch")

    analysis = information["analysis"]
    pid = int(analysis["process"].removeprefix("running (pid ").removesuffix(")"))
    assert pid in [child.pid for child in psutil.Process(client._server.pid).children()]
    assert analysis["documents"] == {uri: {"analyzed_version": 1, "targets": ["ScaledActivation"], "problem": None}}
    (job,) = information["jobs"]
    assert {key: job[key] for key in ("jobId", "uri", "target", "state", "step")} == {
        "jobId": started["jobId"], "uri": uri, "target": "ScaledActivation", "state": "cancelled", "step": end.message
    }  # fmt: skip

    logged = await wait_until(
        lambda: [m for m in client.log_messages if m.message.startswith("drtriton debug information:")], 5, "the log"
    )
    assert logged[0].type == types.MessageType.Info and logged[0].message.endswith(text)
