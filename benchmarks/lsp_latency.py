"""Latency of the language server's instant requests: code actions and code lenses on a 3,000-line file.

Drives the real `drtriton-lsp` over stdio (pytest-lsp's client), steady and right after edits; writes results/lsp-latency.md.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from importlib.metadata import version
from pathlib import Path

from lsprotocol import types
from pytest_lsp import client_capabilities, make_test_lsp_client

RESULTS = Path(__file__).resolve().parent / "results" / "lsp-latency.md"
TARGETS = 50
LINES = 3000
LIGHT_BULB = types.CodeActionTriggerKind.Automatic  # VS Code asks on every cursor move
INVOKED = types.CodeActionTriggerKind.Invoked  # Ctrl+. in VS Code; every code_action() in Neovim

TARGET_TEMPLATE = '''

class Block{index}(nn.Module):
    def __init__(self, width: int):
        super().__init__()
        self.gain = nn.Parameter(torch.ones(width))
        self.bias = nn.Parameter(torch.zeros(width))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.tanh(x * self.gain + self.bias)
        return torch.nn.functional.silu(y) * 0.5
'''


def generated_file() -> str:
    """50 module targets padded with plain helper functions to exactly 3,000 lines."""
    parts = ['"""A large generated file for the latency benchmark."""\n\nimport torch\nimport torch.nn as nn\n']
    parts += [TARGET_TEMPLATE.format(index=index) for index in range(TARGETS)]
    text = "".join(parts)
    helper = 0
    while text.count("\n") < LINES - 4:
        text += f"\n\ndef helper_{helper}(value):\n    return value + {helper}\n"
        helper += 1
    lines = text.splitlines(keepends=True)[:LINES]
    return "".join(lines)


def percentile(samples: list[float], fraction: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(fraction * (len(ordered) - 1)))]


class Session:
    """The client, the document as the client holds it, and the timings by request kind."""

    def __init__(self, client, uri: str, text: str) -> None:
        self.client = client
        self.document = types.TextDocumentIdentifier(uri=uri)
        self.lines = text.splitlines(keepends=True)
        self.version = 1
        self.timings: dict[str, list[float]] = {}

    def forward_line(self, target: int) -> int:
        """The 0-based line of Block{target}'s `def forward`."""
        class_line = self.lines.index(f"class Block{target}(nn.Module):\n")
        return next(line for line in range(class_line, len(self.lines)) if "def forward" in self.lines[line])

    def type_a_line(self, target: int) -> None:
        """One incremental change, as an editor sends it: a comment line at the top of the target's forward."""
        line = self.forward_line(target) + 1
        text = f"        # edit {self.version}\n"
        self.lines.insert(line, text)
        self.version += 1
        at = types.Position(line, 0)
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=self.document.uri, version=self.version),
                content_changes=[types.TextDocumentContentChangePartial(range=types.Range(at, at), text=text)],
            )
        )

    async def code_lens(self, kind: str) -> None:
        started = time.perf_counter()
        lenses = await self.client.text_document_code_lens_async(types.CodeLensParams(text_document=self.document))
        self.timings.setdefault(kind, []).append((time.perf_counter() - started) * 1000)
        assert len(lenses) == TARGETS, len(lenses)

    async def code_action(self, kind: str, target: int, trigger: types.CodeActionTriggerKind) -> None:
        position = types.Position(self.forward_line(target) + 1, 8)
        context = types.CodeActionContext(diagnostics=[], trigger_kind=trigger)
        started = time.perf_counter()
        actions = await self.client.text_document_code_action_async(
            types.CodeActionParams(self.document, types.Range(position, position), context)
        )
        self.timings.setdefault(kind, []).append((time.perf_counter() - started) * 1000)
        assert actions, "no code action inside a target"


async def measure(requests: int, edits: int, pause_s: float) -> dict[str, list[float]]:
    text = generated_file()
    folder = Path(tempfile.mkdtemp(prefix="drtriton-latency-"))
    path = folder / "large_model.py"
    path.write_text(text)
    client = make_test_lsp_client()
    await client.start_io(sys.executable, "-m", "drtriton_lsp.server.main")
    await client.initialize_session(types.InitializeParams(capabilities=client_capabilities("visual-studio-code")))
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=path.as_uri(), language_id="python", version=1, text=text))
    )
    session = Session(client, path.as_uri(), text)

    await session.code_lens("first codeLens after opening (waits for the first analysis)")
    for index in range(requests):
        await session.code_action("codeAction, light bulb", index % TARGETS, LIGHT_BULB)
        await session.code_lens("codeLens")
    # Each request below is the first after an edit (a line typed into one target); the pause between rounds
    # is about typing speed, so the background analysis of one edit often runs during the next request.
    after_an_edit = {
        "first codeLens after an edit": lambda kind, edited: session.code_lens(kind),
        "first codeAction after an edit, light bulb in the edited target": lambda kind, edited: session.code_action(
            kind, edited, LIGHT_BULB
        ),
        "first codeAction after an edit, Ctrl+. in another target": lambda kind, edited: session.code_action(
            kind, (edited + TARGETS // 2) % TARGETS, INVOKED
        ),
        "first codeAction after an edit, Ctrl+. in the edited target (waits for the analysis)": lambda kind, edited: (
            session.code_action(kind, edited, INVOKED)
        ),
    }
    for kind, request in after_an_edit.items():
        for round_number in range(edits):
            edited = round_number % TARGETS
            session.type_a_line(edited)
            await request(kind, edited)
            await asyncio.sleep(pause_s)
    await client.shutdown_session()
    await client.stop()
    return session.timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=300, help="steady requests of each kind (no edit in between)")
    parser.add_argument("--edits", type=int, default=100, help="edits per after-an-edit request kind")
    parser.add_argument("--pause-ms", type=float, default=200, help="time from one edit's request to the next edit")
    arguments = parser.parse_args()
    load_before = os.getloadavg()
    timings = asyncio.run(measure(arguments.requests, arguments.edits, arguments.pause_ms / 1000))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True).stdout.strip()
    rows = ["| request | n | p50 ms | p99 ms | max ms |", "|---|---|---|---|---|"]
    for name, samples in timings.items():
        rows.append(
            f"| {name} | {len(samples)} | {statistics.median(samples):.2f} | {percentile(samples, 0.99):.2f} | {max(samples):.2f} |"
        )
    command = f"python benchmarks/lsp_latency.py --requests {arguments.requests} --edits {arguments.edits} --pause-ms {arguments.pause_ms:g}"
    report = "\n".join(
        [
            "# Language server latency",
            "",
            f"Command: `{command}`  ",
            f"Commit: {commit}{' (with uncommitted changes)' if dirty else ''}  ",
            f"Date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}  ",
            f"Machine: {platform.machine()}, {platform.processor() or 'cpu'}, {os.cpu_count()} cores, Python {platform.python_version()}; "
            f"load average {load_before[0]:.1f} before the run, {os.getloadavg()[0]:.1f} after (other workers share the cores)  ",
            f"Versions: pygls {version('pygls')}, lsprotocol {version('lsprotocol')}, pytest-lsp {version('pytest-lsp')}  ",
            f"File: {LINES} lines, {TARGETS} nn.Module targets; client profile: visual-studio-code; goal: p99 < 50 ms.",
            "",
            "Each request is timed at the client, round trip over stdio. Documents are analysed in a separate",
            "process after each burst of edits; requests answer from the newest analysis, carried over to the",
            "current text (a target touched by an edit shows no result until its analysis is back). Only the",
            "first request after opening, and Ctrl+. inside a target just edited, wait for an analysis.",
            "",
            *rows,
            "",
        ]
    )
    print(report)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(report)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
