"""Document analysis off the request path: a separate process analyses each version, debounced after edits.

Lenses, hovers and code actions read `snapshot` (instant); commands that act on the text await `current`.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from typing import Any, Callable

from pygls.workspace import TextDocument

from drtriton_lsp.errors import SourceError
from drtriton_lsp.runners import lifetime
from drtriton_lsp.server.analysis import (
    DocumentAnalysis,
    LineChange,
    analyze_document,
    carried_over,
    file_path,
    line_change,
)

logger = logging.getLogger(__name__)
# Skips the keystrokes of a word; short enough that lenses settle while the user still looks at them.
EDIT_DEBOUNCE_S = 0.15
STATUS_TIMEOUT_S = 10


@dataclass
class CarriedAnalysis:
    """The newest analysis that parsed, carried over the document's changes one by one (each change is then a
    small block of lines, and an edit in one target leaves the other targets' results in place).

    analysis: for the text of `lines`, the document's latest. changes: (version it made, the change) since the
    analysed version, so that an analysis of a version in between can be carried over them in its turn.
    """

    analysis: DocumentAnalysis
    lines: list[str]
    changes: list[tuple[int | None, LineChange]] = field(default_factory=list)

    def follow(self, document: TextDocument) -> None:
        if self.analysis.version == document.version:
            return
        lines = document.lines
        change = line_change(self.lines, lines)
        self.analysis = carried_over(self.analysis, change, document.version)
        self.lines = lines
        self.changes.append((document.version, change))

    def restart_from(self, fresh: DocumentAnalysis, fresh_lines: list[str]) -> None:
        """A newer analysis than the one carried: carried over the changes made after its version instead."""
        later = [(version, change) for version, change in self.changes if _after(version, fresh.version)]
        if not later:
            self.analysis, self.lines, self.changes = fresh, fresh_lines, []
            return
        if len(later) == len(self.changes) or self.changes[-len(later) - 1][0] != fresh.version:
            # `fresh` read a version that one change here jumped over: one change from its text to the latest.
            later = [(self.analysis.version, line_change(fresh_lines, self.lines))]
        self.analysis = fresh
        for version, change in later:
            self.analysis = carried_over(self.analysis, change, version)
        self.changes = later

    @property
    def analyzed_version(self) -> int | None:
        if self.analysis.carried_over_from is not None:
            return self.analysis.carried_over_from
        return self.analysis.version


class BackgroundAnalysis:
    """The newest analysis of each open document, made in one worker process (parsing 3,000 lines takes
    50-100 ms, and `ast.parse` holds the GIL, so a thread would still stall requests).

    NOTE: every method runs on the event loop's thread; analyses come back to it through asyncio futures.
    """

    def __init__(
        self, open_document: Callable[[str], TextDocument | None], on_analyzed: Callable[[DocumentAnalysis], None]
    ) -> None:
        self._open_document = open_document
        self._on_analyzed = on_analyzed
        self._pool: ProcessPoolExecutor | None = None
        self._newest: dict[str, DocumentAnalysis] = {}
        self._carried: dict[str, CarriedAnalysis] = {}
        self._running: dict[str, asyncio.Future[DocumentAnalysis]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}

    def start_worker(self) -> None:
        """Start the process now, so that the first document opened does not wait for it."""
        self._submit(os.getpid)

    def document_opened(self, uri: str) -> None:
        self._start(uri)

    def document_changed(self, uri: str) -> None:
        document = self._open_document(uri)
        if document is not None and uri in self._carried:
            self._carried[uri].follow(document)
        self._cancel_timer(uri)
        self._timers[uri] = asyncio.get_running_loop().call_later(EDIT_DEBOUNCE_S, self._timer_fired, uri)

    def forget(self, uri: str) -> None:
        self._cancel_timer(uri)
        self._newest.pop(uri, None)
        self._carried.pop(uri, None)

    def snapshot(self, document: TextDocument) -> DocumentAnalysis | None:
        """The analysis for the document's current text, at once: the newest analysis when it read this version
        and parsed, else the newest that parsed carried over to this text; None before any analysis of it."""
        carried = self._carried.get(document.uri)
        if carried is None:  # nothing parsed yet: a file with a syntax error from the start, or too large
            newest = self._newest.get(document.uri)
            return newest if newest is not None and newest.version == document.version else None
        carried.follow(document)
        return carried.analysis

    async def current(self, uri: str) -> tuple[TextDocument, DocumentAnalysis] | None:
        """The document and the analysis of exactly its current version (started now if none is under way)."""
        while True:
            document = self._open_document(uri)
            if document is None:
                return None
            newest = self._newest.get(uri)
            if newest is not None and newest.version == document.version:
                return document, newest
            running = self._running.get(uri)
            if running is None:
                self._cancel_timer(uri)
                running = self._start(uri)
            await asyncio.wait({running})

    async def status(self) -> dict[str, Any]:
        """For drtriton.printDebugInformation: whether the process answers, and what each document's analysis says."""
        if self._pool is None:
            process = "not started"
        else:
            try:
                pid = await asyncio.wait_for(asyncio.wrap_future(self._submit(os.getpid)), STATUS_TIMEOUT_S)
                process = f"running (pid {pid})"
            except (BrokenProcessPool, asyncio.TimeoutError) as failure:
                process = f"not answering ({type(failure).__name__}); it is restarted on the next edit"
        documents = {
            uri: {
                "analyzed_version": analysis.version,
                "targets": [analyzed.target.name for analyzed in analysis.targets],
                "problem": analysis.problem.message if analysis.problem else None,
            }
            for uri, analysis in self._newest.items()
        }
        return {"process": process, "documents": documents}

    def close(self) -> None:
        for uri in list(self._timers):
            self._cancel_timer(uri)
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None

    def _timer_fired(self, uri: str) -> None:
        self._timers.pop(uri, None)
        if uri not in self._running:  # else `_finished` starts the next analysis
            self._start(uri)

    def _cancel_timer(self, uri: str) -> None:
        timer = self._timers.pop(uri, None)
        if timer is not None:
            timer.cancel()

    def _start(self, uri: str, *, retry: bool = False) -> asyncio.Future[DocumentAnalysis] | None:
        document = self._open_document(uri)
        if document is None:
            return None
        version, lines = document.version, document.lines
        running = asyncio.wrap_future(self._submit(analyze_document, uri, version, document.source))
        self._running[uri] = running
        running.add_done_callback(lambda done: self._finished(uri, version, lines, done, retry))
        return running

    def _submit(self, function: Callable[..., Any], *arguments: Any) -> Future:
        """Run `function` in the process; a process that died (killed, out of memory) is replaced once."""
        for _ in range(2):
            if self._pool is None:
                # Tied to this process: a killed server leaves no analysis process waiting for work forever. The
                # pool starts it in `submit`, on the event loop's thread, which lasts as long as the server (the
                # kernel's parent-death signal follows the thread that started a process).
                self._pool = ProcessPoolExecutor(
                    max_workers=1,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=lifetime.end_with_parent,
                    initargs=(os.getpid(),),
                )
            try:
                return self._pool.submit(function, *arguments)
            except BrokenProcessPool:
                logger.warning("the analysis process had stopped; starting a new one")
                self._pool = None
        raise BrokenProcessPool("the analysis process stops as soon as it starts")

    def _finished(
        self, uri: str, version: int | None, lines: list[str], done: asyncio.Future[DocumentAnalysis], retry: bool
    ) -> None:
        """On the event loop: keep the analysis if it is the newest, tell the server, catch up with edits.

        retry: this was the second attempt at this version (the process had stopped during the first).
        """
        if self._running.get(uri) is done:
            del self._running[uri]
        document = self._open_document(uri)
        if document is None:
            return  # closed while it was analysed
        try:
            analysis = done.result()
        except BrokenProcessPool:
            logger.warning("the analysis process stopped while analysing %s", uri)
            self._pool = None
            if not retry:  # killed from outside, say: one more try in a new process
                self._start(uri, retry=True)
                return
            analysis = _unanalyzed(uri, version, "drtriton's analysis process stopped twice while reading this file")
        except Exception as bug:  # a drtriton bug must cost this analysis only, never the server
            logger.exception("analysing %s failed", uri)
            analysis = _unanalyzed(uri, version, f"drtriton's analysis failed ({type(bug).__name__}: {bug})")
        newest = self._newest.get(uri)
        if newest is None or not _after(newest.version, version):
            self._newest[uri] = analysis
        carried = self._carried.get(uri)
        if analysis.problem is None:
            if carried is None:
                self._carried[uri] = CarriedAnalysis(analysis, lines)
            elif _after(version, carried.analyzed_version):
                carried.restart_from(analysis, lines)
        self._on_analyzed(analysis)
        if document.version != version and uri not in self._timers and uri not in self._running:
            self._start(uri)  # edited while this ran, and the debounce already passed


def _after(version: int | None, other: int | None) -> bool:
    """Whether `version` is newer than `other` (a version the editor did not give counts as newest)."""
    return version is None or other is None or version > other


def _unanalyzed(uri: str, version: int | None, what_happened: str) -> DocumentAnalysis:
    problem = SourceError(
        what_happened, "Edit or save the file to analyse it again; if this keeps happening, report it with the server log."
    )
    return DocumentAnalysis(uri, version, file_path(uri), (), problem)
