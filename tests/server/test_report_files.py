"""Where Show report writes: one file per source file and target (two `Model`s in two files never overwrite each
other), named after both, in a folder only the user can read.
"""

from __future__ import annotations

import stat

from drtriton_lsp.server import show_report


def test_each_file_and_target_gets_its_own_private_report(tmp_path, monkeypatch):
    monkeypatch.setattr(show_report, "REPORT_FOLDER", tmp_path / "reports")
    first = show_report.report_path("file:///work/a/model.py", "Model")
    second = show_report.report_path("file:///work/b/model.py", "Model")
    other_target = show_report.report_path("file:///work/a/model.py", "Block")
    assert first.name == second.name == "model.Model.md" and first != second
    assert other_target.parent == first.parent and other_target.name == "model.Block.md"
    assert show_report.report_path("file:///work/my%20net.py", "Net").name == "my net.Net.md"
    for folder in (tmp_path / "reports", first.parent):
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
