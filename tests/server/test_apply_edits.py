"""The edits drtriton.apply sends: whole lines, in the old text's coordinates, that turn the text the job read into the
written one exactly as an editor applies them (CRLF, a last line without a newline, insertions only where possible).
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from lsprotocol import types

from drtriton_lsp.server.apply_kernel import line_edits

LINES = st.lists(st.sampled_from(["import torch", "", "x = 1", "    return x", "# note", "y = 2"]), max_size=8)
ENDINGS = st.sampled_from(["\n", "\r\n"])


def apply(text: str, edits: list[types.TextEdit]) -> str:
    """What an editor does: replace each range (positions in the original text), last edit first."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line))

    def offset(position: types.Position) -> int:
        return starts[position.line] + position.character if position.line < len(lines) else len(text)

    for edit in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
        text = text[: offset(edit.range.start)] + edit.new_text + text[offset(edit.range.end) :]
    return text


def document(lines: list[str], ending: str, final_newline: bool) -> str:
    return ending.join(lines) + (ending if final_newline and lines else "")


@settings(max_examples=300, deadline=None)
@given(LINES, LINES, ENDINGS, st.booleans(), st.booleans())
def test_the_edits_turn_the_old_text_into_the_new(old, new, ending, old_newline, new_newline):
    before, after = document(old, ending, old_newline), document(new, ending, new_newline)
    edits = line_edits(before, after)
    assert apply(before, edits) == after
    assert all(edit.range.start.character == 0 for edit in edits)
    ranges = sorted((e.range.start.line, e.range.end.line, e.range.end.character) for e in edits)
    assert all(earlier[1] <= later[0] for earlier, later in zip(ranges, ranges[1:]))  # never overlapping


def test_an_inserted_block_is_one_insertion_and_the_users_lines_are_not_resent():
    before = "import torch\r\n\r\nclass Net:\r\n    pass\r\n"
    after = "import torch\r\n\r\n# >>> drtriton\r\nK = 1\r\n# <<< drtriton\r\nclass Net:\r\n    pass\r\n"
    (edit,) = line_edits(before, after)
    assert edit.range == types.Range(types.Position(2, 0), types.Position(2, 0))
    assert edit.new_text == "# >>> drtriton\r\nK = 1\r\n# <<< drtriton\r\n"


def test_a_changed_last_line_without_newline_ends_at_its_last_character():
    (edit,) = line_edits("a = 1\nb = 2", "a = 1\nb = 3")
    assert edit.range == types.Range(types.Position(1, 0), types.Position(1, 5))
    assert edit.new_text == "b = 3"
    assert line_edits("same\n", "same\n") == []
