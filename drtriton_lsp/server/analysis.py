"""What the server knows about a document without running it: its targets, their inputs, their text hashes.

Computed with the engine's `ast` analyzer once per document version and cached, so lenses and code actions stay instant.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from lsprotocol import types
from pygls.uris import to_fs_path
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import ServerTextPosition, ServerTextRange

from drtriton_lsp.errors import SourceError
from drtriton_lsp.source.extract import TargetInputs, targets_with_inputs
from drtriton_lsp.source.targets import SourceSpan, Target


@dataclass(frozen=True)
class AnalyzedTarget:
    """A target, whether it has example inputs, and a hash of its text (results are valid for that text)."""

    target: Target
    inputs: TargetInputs
    text_hash: str


@dataclass(frozen=True)
class DocumentAnalysis:
    """One version of one document. `problem` is set (and `targets` empty) when the file does not parse."""

    uri: str
    version: int | None
    path: str | None
    targets: tuple[AnalyzedTarget, ...]
    problem: SourceError | None

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


class AnalysisCache:
    """The latest analysis per document, recomputed only when the document's version moves."""

    def __init__(self) -> None:
        self._by_uri: dict[str, DocumentAnalysis] = {}

    def analyze(self, document: TextDocument) -> DocumentAnalysis:
        cached = self._by_uri.get(document.uri)
        if cached is not None and document.version is not None and cached.version == document.version:
            return cached
        analysis = analyze_document(document.uri, document.version, document.source)
        self._by_uri[document.uri] = analysis
        return analysis

    def forget(self, uri: str) -> None:
        self._by_uri.pop(uri, None)


def analyze_document(uri: str, version: int | None, text: str) -> DocumentAnalysis:
    path = file_path(uri)
    try:
        availability = targets_with_inputs(text, path)
    except SourceError as problem:
        return DocumentAnalysis(uri, version, path, (), problem)
    lines = text.splitlines(keepends=True)
    analyzed = tuple(
        AnalyzedTarget(entry.target, entry, span_text_hash(lines, entry.target.span)) for entry in availability
    )
    return DocumentAnalysis(uri, version, path, analyzed, None)


def file_path(uri: str) -> str | None:
    """The file system path of a `file:` URI; None for anything else (untitled buffers, remote files)."""
    if not uri.startswith("file:"):
        return None
    return to_fs_path(uri)


def span_text_hash(lines: list[str], span: SourceSpan) -> str:
    """A hash of the whole lines a span covers: a result stays valid while this text is unchanged."""
    text = "".join(lines[span.start_line - 1 : span.end_line])
    return hashlib.blake2b(text.encode("utf-8"), digest_size=16).hexdigest()


def client_range(document: TextDocument, lines: list[str], span: SourceSpan) -> types.Range:
    """An engine span (1-based lines, character columns) as an LSP range in the client's position encoding.

    lines: `document.lines`, read once per request (it splits the whole text on every access).
    """
    server_range = ServerTextRange(
        ServerTextPosition(span.start_line - 1, span.start_column),
        ServerTextPosition(span.end_line - 1, span.end_column),
    )
    return document.position_codec.range_to_client_units(lines, server_range)
