"""What the server knows about a document without running it: its targets, their inputs, their text hashes.

`analyze_document` runs in the analysis process (background_analysis.py); `carried_over` maps its answer onto later text.
"""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import dataclass

from pygls.uris import to_fs_path  # NOTE: the analysis process imports this module: no lsprotocol (seconds to import)

from drtriton_lsp.errors import SourceError
from drtriton_lsp.server.fusion_hints import FusibleChain, fusible_chains
from drtriton_lsp.source.applied import AppliedKernel, applied_kernels
from drtriton_lsp.source.extract import TargetInputs, targets_with_inputs
from drtriton_lsp.source.pyfile import parse_file
from drtriton_lsp.source.targets import SourceSpan, Target

# About 60,000 lines of ordinary Python. Bigger files are generated code, not models someone is tuning.
MAX_ANALYZED_CHARACTERS = 2_000_000


class DocumentTooLarge(SourceError):
    """A document over MAX_ANALYZED_CHARACTERS: not analysed at all."""


@dataclass(frozen=True)
class AnalyzedTarget:
    """A target, whether it has example inputs, and a hash of its text (results are valid for that text).

    text_hash: None when the target's region was edited after the analysis (see `carried_over`): its text is
    not known to match any result, so none is shown, and its `inputs` may be out of date.
    """

    target: Target
    inputs: TargetInputs
    text_hash: str | None
    # the kernels Apply wrote into the file for this target, when it did (then no hint or on-save job for it)
    applied: AppliedKernel | None = None

    @property
    def edited_since_analysis(self) -> bool:
        return self.text_hash is None


@dataclass(frozen=True)
class DocumentAnalysis:
    """One version of one document. `problem` is set (and `targets` empty) when the file could not be analysed.

    carried_over_from: the version actually analysed, when this is an older analysis mapped onto newer text.
    """

    uri: str
    version: int | None
    path: str | None
    targets: tuple[AnalyzedTarget, ...]
    problem: SourceError | None
    fusible_chains: tuple[FusibleChain, ...] = ()
    carried_over_from: int | None = None

    def target_named(self, name: str) -> AnalyzedTarget | None:
        matches = [analyzed for analyzed in self.targets if analyzed.target.name == name]
        return matches[-1] if matches else None

    def targets_touching(self, lines: range) -> list[AnalyzedTarget]:
        """Targets whose span shares a line (0-based) with `lines`."""
        return [
            analyzed
            for analyzed in self.targets
            if analyzed.target.span.start_line - 1 < lines.stop and lines.start <= analyzed.target.span.end_line - 1
        ]


def analyze_document(uri: str, version: int | None, text: str) -> DocumentAnalysis:
    """Targets, their inputs and hashes, and the fusible chains of their forwards (no code runs)."""
    path = file_path(uri)
    if len(text) > MAX_ANALYZED_CHARACTERS:
        problem = DocumentTooLarge(
            f"{path or uri} has {len(text):,} characters; drtriton analyses files up to "
            f"{MAX_ANALYZED_CHARACTERS:,}, so it shows nothing for this one",
            "Move the model you want optimized into a file of its own.",
            path=path,
        )
        return DocumentAnalysis(uri, version, path, (), problem)
    try:
        availability = targets_with_inputs(text, path)
    except SourceError as problem:
        return DocumentAnalysis(uri, version, path, (), problem)
    lines = text.splitlines(keepends=True)
    parsed = parse_file(text, path)
    applied = applied_kernels(parsed)
    analyzed = tuple(
        AnalyzedTarget(entry.target, entry, span_text_hash(lines, entry.target.span), applied.get(entry.target.name))
        for entry in availability
    )
    chains = fusible_chains(parsed.tree, [entry.target for entry in availability if entry.target.name not in applied])
    return DocumentAnalysis(uri, version, path, analyzed, None, tuple(chains))


@dataclass(frozen=True)
class LineChange:
    """How one text became the next: lines [first, old_stop) were replaced by lines [first, new_stop) (0-based);
    the lines before and after match. old_line_count: how many lines the old text had."""

    first: int
    old_stop: int
    new_stop: int
    old_line_count: int


def line_change(before: list[str], after: list[str]) -> LineChange:
    """The one block of lines between the common first lines and the common last lines."""
    limit = min(len(before), len(after))
    first = 0
    while first < limit and before[first] == after[first]:
        first += 1
    old_stop, new_stop = len(before), len(after)
    while old_stop > first and new_stop > first and before[old_stop - 1] == after[new_stop - 1]:
        old_stop -= 1
        new_stop -= 1
    return LineChange(first, old_stop, new_stop, len(before))


def carried_over(analysis: DocumentAnalysis, change: LineChange, version: int | None) -> DocumentAnalysis:
    """`analysis` mapped over `change` onto the text of `version`, without parsing that text.

    Lines outside the changed block keep their text and move with it, so a target clear of the block keeps its
    hash, hence its result. A target whose region touches the block is marked edited: its region runs from the
    end of the target before it to the start of the one after it (its pragma lines, and the lines its body
    would grow into).
    """
    first, old_stop, new_stop = change.first, change.old_stop, change.new_stop
    analyzed_version = analysis.version if analysis.carried_over_from is None else analysis.carried_over_from
    if first == old_stop == new_stop:  # the same text (an edit undone, a save)
        return dataclasses.replace(analysis, version=version, carried_over_from=analyzed_version)
    shift = new_stop - old_stop

    def moved(line: int) -> int | None:
        """A 1-based line of the old text in the new; None inside the changed block."""
        if line <= first:
            return line
        if line > old_stop:
            return line + shift
        return None

    def carried(span: SourceSpan) -> SourceSpan:
        start = moved(span.start_line) or first + 1
        end = moved(span.end_line) or max(new_stop, start)
        return SourceSpan(start, span.start_column, end, span.end_column)

    targets = []
    kept_spans = []
    for index, analyzed in enumerate(analysis.targets):
        span = analyzed.target.span
        region_start = analysis.targets[index - 1].target.span.end_line + 1 if index > 0 else 1
        region_end = analysis.targets[index + 1].target.span.start_line - 1 if index + 1 < len(analysis.targets) else change.old_line_count
        # The block is lines first+1..old_stop (1-based); widened by one line, an insertion between two lines touches both.
        edited = region_start <= old_stop + 1 and first <= region_end
        if edited and moved(analyzed.target.name_span.start_line) is None:
            continue  # the edit covers the target's name: left out until the analysis catches up
        target = _with_spans(analyzed.target, carried)
        inputs = dataclasses.replace(analyzed.inputs, target=target)
        targets.append(AnalyzedTarget(target, inputs, None if edited else analyzed.text_hash, analyzed.applied))
        if not edited:
            kept_spans.append(span)
    chains = tuple(
        dataclasses.replace(chain, span=carried(chain.span))
        for chain in analysis.fusible_chains
        if any(span.start_line <= chain.span.start_line and chain.span.end_line <= span.end_line for span in kept_spans)
    )
    return DocumentAnalysis(analysis.uri, version, analysis.path, tuple(targets), None, chains, analyzed_version)


def _with_spans(target: Target, carried) -> Target:
    return dataclasses.replace(
        target,
        span=carried(target.span),
        name_span=carried(target.name_span),
        forward_span=carried(target.forward_span),
    )


def file_path(uri: str) -> str | None:
    """The file system path of a `file:` URI; None for anything else (untitled buffers, remote files)."""
    if not uri.startswith("file:"):
        return None
    return to_fs_path(uri)


def span_text_hash(lines: list[str], span: SourceSpan) -> str:
    """A hash of the whole lines a span covers: a result stays valid while this text is unchanged."""
    text = "".join(lines[span.start_line - 1 : span.end_line])
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()
