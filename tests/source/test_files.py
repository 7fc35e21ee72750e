"""Reading and replacing the user's file: bytes kept (BOM, CRLF), and no edit saved meanwhile is ever lost."""

import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from drtriton_lsp.errors import DrtritonError
from drtriton_lsp.source import files
from drtriton_lsp.source.files import read_source_file, replace_if_unchanged

ORIGINAL = b"import torch\r\n\r\nx = 1\r\n"
WRITTEN = b"import torch\r\n\r\n# drtriton was here\r\nx = 1\r\n"
APPENDED = b"y = 2  # saved by the user meanwhile\r\n"


@pytest.fixture
def user_file(tmp_path) -> Path:
    path = tmp_path / "model.py"
    path.write_bytes(ORIGINAL)
    path.chmod(0o640)
    return path


def test_reading_keeps_line_endings_and_notes_the_byte_order_mark(tmp_path):
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf" + ORIGINAL)

    source = read_source_file(path)

    assert source.text == ORIGINAL.decode() and source.has_bom
    assert source.encoded(source.text + "z = 3\r\n") == b"\xef\xbb\xbf" + ORIGINAL + b"z = 3\r\n"


def test_a_file_without_a_byte_order_mark_is_read_whole(tmp_path):
    path = tmp_path / "plain.py"
    path.write_bytes(ORIGINAL)
    source = read_source_file(path)
    assert source.text == ORIGINAL.decode() and not source.has_bom and source.raw == ORIGINAL


def test_a_missing_file_or_a_folder_is_refused_with_what_to_do(tmp_path):
    with pytest.raises(DrtritonError) as missing:
        read_source_file(tmp_path / "nowhere.py")
    assert missing.value.message.endswith("nowhere.py does not exist") and missing.value.hint == "check the path"
    with pytest.raises(DrtritonError) as folder:
        read_source_file(tmp_path)
    assert "is a folder, not a file" in folder.value.message and folder.value.hint == "name a Python file"


def test_an_executable_file_stays_executable(user_file):
    user_file.chmod(0o755)
    replace_if_unchanged(user_file, ORIGINAL, WRITTEN)
    assert user_file.stat().st_mode & 0o7777 == 0o755


def test_a_file_that_is_not_utf8_is_refused_with_what_to_do(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes("x = 'caf\xe9'\n".encode("latin-1"))

    with pytest.raises(DrtritonError) as raised:
        read_source_file(path)

    assert "is not UTF-8 text" in raised.value.message and "save it as UTF-8" in raised.value.hint


def test_an_unchanged_file_is_replaced_and_keeps_its_mode(user_file):
    replace_if_unchanged(user_file, ORIGINAL, WRITTEN)

    assert user_file.read_bytes() == WRITTEN
    assert user_file.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in user_file.parent.iterdir()) == ["model.py"]  # no temporary file left


def test_a_file_changed_before_the_check_is_left_alone(user_file, monkeypatch):
    user_file.write_bytes(ORIGINAL + APPENDED)
    renamed_onto_it = []
    real_replace = os.replace
    monkeypatch.setattr(
        files.os, "replace", lambda source, destination: (renamed_onto_it.append(destination), real_replace(source, destination))
    )

    with pytest.raises(DrtritonError) as raised:
        replace_if_unchanged(user_file, ORIGINAL, WRITTEN)

    assert "changed while drtriton was working; nothing was written" in raised.value.message
    assert user_file.read_bytes() == ORIGINAL + APPENDED
    assert renamed_onto_it == []  # refused before any rename, not replaced and put back
    assert sorted(p.name for p in user_file.parent.iterdir()) == ["model.py"]


def test_an_edit_saved_between_the_check_and_the_rename_is_put_back(user_file, monkeypatch):
    real_replace = os.replace

    def save_then_replace(source, destination):
        if Path(destination) == user_file:
            with open(user_file, "ab") as stream:  # the user's save lands just before the rename
                stream.write(APPENDED)
        real_replace(source, destination)

    monkeypatch.setattr(files.os, "replace", save_then_replace)

    with pytest.raises(DrtritonError) as raised:
        replace_if_unchanged(user_file, ORIGINAL, WRITTEN)

    assert "changed while drtriton was working" in raised.value.message
    assert user_file.read_bytes() == ORIGINAL + APPENDED
    assert sorted(p.name for p in user_file.parent.iterdir()) == ["model.py"]


def test_a_save_through_a_handle_opened_before_the_rename_is_put_back(user_file, monkeypatch):
    real_replace = os.replace

    def replace_while_the_editor_saves(source, destination):
        if Path(destination) == user_file:
            stream = open(user_file, "ab")  # the editor opened the file; its write lands after the rename
            threading.Timer(0.01, lambda: (stream.write(APPENDED), stream.close())).start()
        real_replace(source, destination)

    monkeypatch.setattr(files.os, "replace", replace_while_the_editor_saves)

    with pytest.raises(DrtritonError):
        replace_if_unchanged(user_file, ORIGINAL, WRITTEN)

    assert user_file.read_bytes() == ORIGINAL + APPENDED


def test_a_save_after_the_rename_stays_in_the_written_file(user_file, monkeypatch):
    real_replace = os.replace

    def replace_then_save(source, destination):
        real_replace(source, destination)
        if Path(destination) == user_file:
            with open(user_file, "ab") as stream:
                stream.write(APPENDED)

    monkeypatch.setattr(files.os, "replace", replace_then_save)

    replace_if_unchanged(user_file, ORIGINAL, WRITTEN)

    assert user_file.read_bytes() == WRITTEN + APPENDED


def test_edits_on_both_sides_of_the_rename_keep_the_earlier_one_beside_the_file(user_file, monkeypatch):
    real_replace = os.replace

    def save_around_the_rename(source, destination):
        if Path(destination) == user_file:
            with open(user_file, "ab") as stream:
                stream.write(APPENDED)
        real_replace(source, destination)
        if Path(destination) == user_file:
            with open(user_file, "ab") as stream:
                stream.write(b"z = 3\r\n")

    monkeypatch.setattr(files.os, "replace", save_around_the_rename)

    with pytest.raises(DrtritonError) as raised:
        replace_if_unchanged(user_file, ORIGINAL, WRITTEN)

    conflict = user_file.with_name("model.py.drtriton-conflict")
    assert str(conflict) in raised.value.message
    assert conflict.read_bytes() == ORIGINAL + APPENDED
    assert user_file.read_bytes() == WRITTEN + b"z = 3\r\n"


APPEND_WHEN_THE_TEMPORARY_FILE_APPEARS = """
import os, sys, time
path, line = sys.argv[1], sys.argv[2].encode()
print("ready", flush=True)
deadline = time.monotonic() + 3
while time.monotonic() < deadline:
    if any(name.endswith(".drtriton.tmp") for name in os.listdir(os.path.dirname(path))):
        with open(path, "ab") as stream:
            stream.write(line)
        print("appended", flush=True)
        break
"""


def test_a_concurrent_writer_never_loses_its_append(tmp_path):
    """Another process appends as soon as drtriton's temporary file appears: whatever the timing, the append stays."""
    appends = 0
    for attempt in range(12):
        path = tmp_path / f"model{attempt}.py"
        path.write_bytes(ORIGINAL)
        writer = subprocess.Popen(
            [sys.executable, "-c", APPEND_WHEN_THE_TEMPORARY_FILE_APPEARS, str(path), APPENDED.decode()],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert writer.stdout.readline() == "ready\n"
        try:
            replace_if_unchanged(path, ORIGINAL, WRITTEN)
            written = True
        except DrtritonError:
            written = False
        appended = writer.communicate(timeout=10)[0] == "appended\n"

        final = path.read_bytes()
        if appended:
            appends += 1
            assert final == (WRITTEN if written else ORIGINAL) + APPENDED, f"attempt {attempt}: the append was lost"
        else:  # the writer missed the temporary file: nothing raced
            assert written and final == WRITTEN
    assert appends, "the writer never saw drtriton's temporary file: the race was not tried"


def test_a_file_system_without_hard_links_still_gets_the_checked_write(user_file, monkeypatch):
    def no_hard_links(source, destination):
        raise OSError(1, "Operation not permitted")

    monkeypatch.setattr(files.os, "link", no_hard_links)

    replace_if_unchanged(user_file, ORIGINAL, WRITTEN)

    assert user_file.read_bytes() == WRITTEN
    assert sorted(p.name for p in user_file.parent.iterdir()) == ["model.py"]
