"""Latency of the language server's instant requests: code actions and code lenses on a 3,000-line file.

Drives the real `drtriton-lsp` over stdio (pytest-lsp's client), prints p50/p99 and writes results/lsp-latency.md.
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


async def measure(requests: int) -> dict[str, list[float]]:
    text = generated_file()
    folder = Path(tempfile.mkdtemp(prefix="drtriton-latency-"))
    path = folder / "large_model.py"
    path.write_text(text)
    uri = path.as_uri()
    client = make_test_lsp_client()
    await client.start_io(sys.executable, "-m", "drtriton_lsp.server.main")
    await client.initialize_session(types.InitializeParams(capabilities=client_capabilities("visual-studio-code")))
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=text))
    )
    document = types.TextDocumentIdentifier(uri=uri)
    target_lines = [number for number, line in enumerate(text.splitlines()) if line.startswith("class Block")]
    timings: dict[str, list[float]] = {"first code lens (analysis)": [], "codeAction": [], "codeLens": []}

    started = time.perf_counter()
    lenses = await client.text_document_code_lens_async(types.CodeLensParams(text_document=document))
    timings["first code lens (analysis)"].append((time.perf_counter() - started) * 1000)
    assert len(lenses) == TARGETS, len(lenses)
    for index in range(requests):
        line = target_lines[index % len(target_lines)] + 3
        position = types.Position(line, 8)
        started = time.perf_counter()
        actions = await client.text_document_code_action_async(
            types.CodeActionParams(document, types.Range(position, position), types.CodeActionContext(diagnostics=[]))
        )
        timings["codeAction"].append((time.perf_counter() - started) * 1000)
        assert actions, "no code action inside a target"
        started = time.perf_counter()
        await client.text_document_code_lens_async(types.CodeLensParams(text_document=document))
        timings["codeLens"].append((time.perf_counter() - started) * 1000)
    await client.shutdown_session()
    await client.stop()
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--requests", type=int, default=300, help="requests of each kind")
    arguments = parser.parse_args()
    timings = asyncio.run(measure(arguments.requests))
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "status", "--porcelain"], capture_output=True, text=True).stdout.strip()
    rows = ["| request | n | p50 ms | p99 ms | max ms |", "|---|---|---|---|---|"]
    for name, samples in timings.items():
        rows.append(
            f"| {name} | {len(samples)} | {statistics.median(samples):.2f} | {percentile(samples, 0.99):.2f} | {max(samples):.2f} |"
        )
    report = "\n".join(
        [
            "# Language server latency",
            "",
            f"Command: `python benchmarks/lsp_latency.py --requests {arguments.requests}`  ",
            f"Commit: {commit}{' (with uncommitted changes)' if dirty else ''}  ",
            f"Date: {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}  ",
            f"Machine: {platform.machine()}, {platform.processor() or 'cpu'}, {os.cpu_count()} cores, Python {platform.python_version()}  ",
            f"Versions: pygls {version('pygls')}, lsprotocol {version('lsprotocol')}, pytest-lsp {version('pytest-lsp')}  ",
            f"File: {LINES} lines, {TARGETS} nn.Module targets; client profile: visual-studio-code; goal: p99 < 50 ms.",
            "",
            "Each request is timed at the client, round trip over stdio. The first code lens request analyzes",
            "the document; later requests on the same version reuse that analysis.",
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
