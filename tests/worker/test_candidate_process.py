"""The judge's side of the pipe to the candidate's process: only a well-formed answer to the request just sent is a
result; anything else the process says or does is a rejection with its name (a forged or malformed message, an
error of a kind the host never sends, silence past the limit, an exit or a crash).

A few lines of plain Python stand in for the candidate's process (no torch), scripted to answer each request.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import textwrap
import threading
import time

import pytest

from drtriton_lsp.worker.candidate_process import CandidateProcess, Rejected


def scripted(answer: str) -> CandidateProcess:
    """A CandidateProcess whose process reads one request and runs `answer` (request in `request`, `say` writes a
    line to the judge)."""
    script = (
        "import json, os, signal, sys, time\n"
        "def say(line):\n    sys.stdout.write(line + '\\n'); sys.stdout.flush()\n"
        "request = json.loads(sys.stdin.readline())\n" + textwrap.dedent(answer)
    )
    candidate = object.__new__(CandidateProcess)
    candidate.process = subprocess.Popen(
        [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    candidate.messages = queue.Queue()
    candidate.ready, candidate.next_id = True, 0
    threading.Thread(target=candidate._read, daemon=True).start()
    return candidate


def rejection(answer: str, limit_s: float = 20.0) -> Rejected:
    candidate = scripted(answer)
    try:
        with pytest.raises(Rejected) as raised:
            candidate.request("call", {}, limit_s, "primary trial")
    finally:
        candidate.kill()
    return raised.value


def test_a_well_formed_answer_to_this_request_is_the_result():
    candidate = scripted("say(json.dumps({'id': request['id'], 'result': {'launches': 3}}))")
    assert candidate.request("call", {}, 20.0, "primary trial") == {"launches": 3}
    candidate.kill()


def test_compiling_time_is_not_counted_against_the_call():
    # 2 s compiling, then 1 s of the call itself: within a 2 s limit once the compile is left out
    candidate = scripted("""
        say('{"event": "compiling"}'); time.sleep(2.0); say('{"event": "compiled"}')
        time.sleep(1.0); say(json.dumps({'id': request['id'], 'result': {}}))
    """)
    assert candidate.request("call", {}, 2.0, "primary trial") == {}
    candidate.kill()


@pytest.mark.parametrize(
    ("answer", "detail"),
    [
        ("say(json.dumps({'id': request['id'] + 1, 'result': {}}))", "unexpected message from the candidate's process"),
        ("say(json.dumps({'id': request['id'], 'result': {}, 'error': {}}))", "unexpected message"),
        ("say('verified: True')", "a message that is not JSON: 'verified: True"),
        ("say('[1, 2]')", "a message that is not an object"),
        ("say(json.dumps({'id': request['id'], 'result': [1]}))", "a result that is not an object"),
        ("say(json.dumps({'id': request['id'], 'error': {'kind': 'verified'}}))",
         "an error of unknown kind 'verified'"),
        ("say('{\"pad\": \"' + 'x' * (1 << 20) + '\"}')", "an oversized message"),
        ("say('{\"event\": \"compiling\"}'); say('{\"event\": \"done\"}')", "did not report a compile's end"),
    ],
)
def test_anything_but_a_well_formed_answer_is_a_protocol_violation(answer, detail):
    rejected = rejection(answer)
    assert rejected.reason == "protocol_violation" and detail in rejected.detail


def test_an_error_of_a_kind_the_host_sends_is_the_candidates_with_what_it_was_doing():
    error = "{'kind': 'runtime_error', 'message': 'boom'}"
    rejected = rejection(f"say(json.dumps({{'id': request['id'], 'error': {error}}}))")
    assert (rejected.reason, rejected.detail) == ("runtime_error", "primary trial: boom")


def test_silence_past_the_limit_is_a_timeout_and_the_process_is_stopped():
    candidate = scripted("time.sleep(60)")
    started = time.monotonic()
    with pytest.raises(Rejected) as raised:
        candidate.request("call", {}, 1.0, "primary trial")
    assert (raised.value.reason, raised.value.detail) == ("timeout", "primary trial: no answer in 1 s (a hang?)")
    assert time.monotonic() - started < 5 and candidate.process.poll() is not None


def test_an_exit_or_a_crash_is_named():
    exited = rejection("sys.exit(3)")
    assert exited.reason == "crashed"
    assert exited.detail == "primary trial: the candidate's process exited with status 3 without answering"
    crashed = rejection("os.kill(os.getpid(), signal.SIGSEGV)")
    assert crashed.reason == "crashed"
    assert crashed.detail == (
        "primary trial: the candidate's process was killed by SIGSEGV (an out-of-bounds memory access in a kernel?)"
    )


def test_a_process_that_talks_before_it_is_ready_is_refused():
    candidate = scripted("")
    candidate.ready = False
    candidate.process.stdin.close()
    candidate.messages.put('{"event": "verified"}\n')
    with pytest.raises(Rejected) as raised:
        candidate.wait_ready()
    assert raised.value.reason == "protocol_violation" and "before it was ready" in raised.value.detail
    candidate.kill()


def test_the_limit_counts_from_the_sending_so_the_judges_work_meanwhile_is_part_of_it():
    answers_in_a_second = "time.sleep(1.0); say(json.dumps({'id': request['id'], 'result': {'launches': 1}}))"
    candidate = scripted(answers_in_a_second)
    candidate.send("call", {})
    time.sleep(1.5)  # the judge runs the reference meanwhile
    assert candidate.answer(1.0, "primary trial") == {"launches": 1}  # it answered within 1 s of the sending
    candidate.kill()

    hangs = scripted("time.sleep(60)")
    hangs.send("call", {})
    time.sleep(1.0)
    started = time.monotonic()
    with pytest.raises(Rejected, match="no answer in 2 s"):
        hangs.answer(2.0, "primary trial")
    assert time.monotonic() - started < 1.8  # two seconds after the sending, not after the judge asked


def test_a_request_sent_while_the_process_starts_waits_in_the_pipe_and_its_allowance_counts_from_ready():
    # the judge sends the load before it builds the reference; the process reads it once its imports are done
    starts_slowly = """
        time.sleep(1.5); say('{"event": "ready"}')
        say(json.dumps({'id': request['id'], 'result': {'weights': 'copied from the reference'}}))
    """
    candidate = scripted(starts_slowly)
    candidate.ready = False
    candidate.send("load", {})
    assert candidate.answer(1.0, "importing the candidate") == {"weights": "copied from the reference"}
    candidate.kill()
