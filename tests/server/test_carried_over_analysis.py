"""carried_over and CarriedAnalysis: the newest analysis mapped onto text typed since, so requests answer at once.

Targets clear of the edits must match a fresh analysis exactly; a touched target must show no result (no hash).
"""

from __future__ import annotations

from pygls.workspace import TextDocument

from drtriton_lsp.server.analysis import analyze_document, carried_over, line_change
from drtriton_lsp.server.background_analysis import CarriedAnalysis

URI = "file:///project/blocks.py"
SOURCE = """import torch
import torch.nn as nn


# drtriton: inputs = [torch.randn(4, 8)]
class First(nn.Module):
    def forward(self, x):
        y = torch.relu(x) * 2.0
        return torch.sigmoid(y) + 1.0
# drtriton: inputs = [torch.randn(4, 8)]
class Second(nn.Module):
    def forward(self, x):
        return x - 1.0


# drtriton: inputs = [torch.randn(4, 8)]
class Third(nn.Module):
    def forward(self, x):
        y = torch.tanh(x) * 3.0
        return y / 2.0
"""


def carry(before: str, after: str):
    """(the analysis of `before` carried over to `after`, a fresh analysis of `after`)."""
    old = analyze_document(URI, 1, before)
    carried = carried_over(old, line_change(before.splitlines(keepends=True), after.splitlines(keepends=True)), 2)
    return carried, analyze_document(URI, 2, after)


def test_an_edit_inside_one_target_hides_only_its_hash_and_moves_the_targets_below():
    carried, fresh = carry(SOURCE, SOURCE.replace("        return y / 2.0\n", "        y = y / 2.0\n        return y\n"))
    first, second, third = carried.targets
    assert (first, second) == fresh.targets[:2]
    assert third.edited_since_analysis and third.target.name_span == fresh.targets[2].target.name_span
    assert carried.carried_over_from == 1 and carried.version == 2

    carried, fresh = carry(SOURCE, SOURCE.replace("        return torch.sigmoid", "        # why\n        return torch.sigmoid"))
    first, second, third = carried.targets
    assert first.edited_since_analysis and not second.edited_since_analysis and not third.edited_since_analysis
    assert (second, third) == fresh.targets[1:]  # one line lower, same text, same hash
    assert [chain.span for chain in carried.fusible_chains] == [fresh.fusible_chains[-1].span]  # Third's only


def test_a_line_added_right_below_a_target_counts_as_an_edit_of_it():
    """Indented, the new line is part of First's body: the result for First must go."""
    carried, fresh = carry(SOURCE, SOURCE.replace("+ 1.0\n", "+ 1.0\n        x = x + 1\n"))
    assert fresh.targets[0].target.span.end_line == 10
    assert [analyzed.edited_since_analysis for analyzed in carried.targets] == [True, True, False]
    assert carried.targets[2] == fresh.targets[2]


def test_a_target_whose_name_is_being_typed_is_left_out_until_analysed():
    carried, fresh = carry(SOURCE, SOURCE.replace("class Second(", "class Sec(", 1))
    assert [analyzed.target.name for analyzed in carried.targets] == ["First", "Third"]
    assert carried.targets[1] == fresh.targets[2]


def test_the_same_text_again_is_the_same_analysis():
    carried, fresh = carry(SOURCE, SOURCE)
    assert (carried.targets, carried.fusible_chains) == (fresh.targets, fresh.fusible_chains)


def test_edits_in_two_targets_before_any_analysis_leave_the_target_between_them_alone():
    """Carried change by change, not in one block from the first edit to the last (which spans Second)."""
    in_first = SOURCE.replace("* 2.0\n", "* 2.0  # typed\n")
    in_both = in_first.replace("* 3.0\n", "* 3.0  # typed\n")
    carried = CarriedAnalysis(analyze_document(URI, 1, SOURCE), SOURCE.splitlines(keepends=True))
    carried.follow(TextDocument(URI, in_first, version=2))
    carried.follow(TextDocument(URI, in_both, version=3))
    assert [analyzed.edited_since_analysis for analyzed in carried.analysis.targets] == [True, False, True]
    assert carried.analysis.targets[1] == analyze_document(URI, 3, in_both).targets[1]

    # The analysis of version 2 comes back while version 3 is the latest: carried over the last change only.
    carried.restart_from(analyze_document(URI, 2, in_first), in_first.splitlines(keepends=True))
    assert carried.analysis.targets[:2] == analyze_document(URI, 3, in_both).targets[:2]
    assert carried.analysis.targets[2].edited_since_analysis
    assert (carried.analysis.version, carried.analyzed_version) == (3, 2)
