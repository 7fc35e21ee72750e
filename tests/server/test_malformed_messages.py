"""Malformed requests and notifications, as a buggy or hostile client sends them: each request gets an answer
(JSON-RPC -32602 naming the field), nothing pops up in the editor, and the server goes on serving.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from socket_helpers import RawClient, free_port, initialize_params, private_token_file, server_command, session_settings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
INVALID_PARAMS = -32602
SHOW_MESSAGE = "window/showMessage"


@pytest.fixture
def session(tmp_path):
    """An initialised session with a server on a loopback port, and an example document: (client, document)."""
    token_file, token = private_token_file(tmp_path)
    port = free_port()
    process = subprocess.Popen(server_command("--tcp", f"127.0.0.1:{port}", "--token-file", str(token_file)))
    client = RawClient.connect(("127.0.0.1", port), lambda: process.poll() is None)
    client.request(1, "initialize", initialize_params(**session_settings(token)))
    assert "result" in client.response_to(1)
    client.notify("initialized", {})
    example = tmp_path / "model.py"
    example.write_text((EXAMPLES / "scaled_activation_chain.py").read_text())
    document = {"uri": example.as_uri(), "languageId": "python", "version": 1, "text": example.read_text()}
    client.notify("textDocument/didOpen", {"textDocument": document})
    yield client, document
    client.request(99, "shutdown")
    client.response_to(99)
    client.notify("exit")
    assert process.wait(timeout=30) == 0


def answer_and_what_came_before(client: RawClient, request_id: int) -> tuple[dict, list[dict]]:
    """The answer to `request_id`, and every message the server sent before it."""
    before = []
    while True:
        message = client.receive()
        assert message is not None, f"the server closed the connection before answering request {request_id}"
        if message.get("id") == request_id and "method" not in message:
            return message, before
        before.append(message)


@pytest.mark.parametrize(
    ("method", "params", "field"),
    [
        ("textDocument/hover", {"textDocument": {"uri": "URI"}, "position": {"line": 2**31, "character": 0}}, "line"),
        ("textDocument/codeLens", {}, "textDocument"),
        ("textDocument/hover", {"textDocument": "URI", "position": {"line": 0, "character": 0}}, "textDocument"),
        ("textDocument/codeAction", {"textDocument": {"uri": "URI"}, "range": {"start": {"line": -1, "character": 0},
                                     "end": {"line": 1, "character": 0}}, "context": {"diagnostics": []}}, "line"),
    ],
)
def test_a_request_with_malformed_params_is_answered_invalid_params_without_a_popup(session, method, params, field):
    client, document = session
    params = {key: {**value, "uri": document["uri"]} if value == {"uri": "URI"} else value for key, value in params.items()}
    client.request(5, method, params)
    answer, before = answer_and_what_came_before(client, 5)
    assert answer["error"]["code"] == INVALID_PARAMS, answer
    assert answer["error"]["message"].startswith(f"invalid params for {method}: ")
    assert field in answer["error"]["message"]
    assert not [message for message in before if message.get("method") == SHOW_MESSAGE]
    # the server goes on serving the same document
    client.request(6, "textDocument/codeLens", {"textDocument": {"uri": document["uri"]}})
    lenses, before = answer_and_what_came_before(client, 6)
    assert [lens["command"]["title"] for lens in lenses["result"]] == ["Generate Triton kernel"]
    assert not [message for message in before if message.get("method") == SHOW_MESSAGE]


def test_notifications_that_fail_are_logged_not_shown(session, tmp_path):
    client, document = session
    unopened = (tmp_path / "never_opened.py").as_uri()
    change = {"range": {"start": {"line": 0, "character": 0}, "end": {"line": 0, "character": 0}}, "text": "# edit\n"}
    client.notify("textDocument/didChange", {"textDocument": {"uri": unopened, "version": 2}, "contentChanges": [change]})
    client.notify("textDocument/didChange", {"textDocument": {"uri": document["uri"]}, "contentChanges": "nonsense"})
    client.notify("textDocument/didSave", {"textDocument": 7})
    client.request(7, "textDocument/codeLens", {"textDocument": {"uri": document["uri"]}})
    lenses, before = answer_and_what_came_before(client, 7)
    assert [lens["command"]["title"] for lens in lenses["result"]] == ["Generate Triton kernel"]
    assert not [message for message in before if message.get("method") == SHOW_MESSAGE]
    logged = [message["params"]["message"] for message in before if message.get("method") == "window/logMessage"]
    assert any("ignored a malformed notification textDocument/didChange" in line for line in logged), logged
    assert any("ignored a malformed notification textDocument/didSave" in line for line in logged), logged
    assert any("could not be handled" in line and "never_opened.py" in line for line in logged), logged
