"""A report's timing as a small SVG bar chart: eager, torch.compile (and max-autotune) and Triton, one bar each.

Shown beside the Markdown report in the editor; None when nothing was timed (no GPU), so no chart claims a speed.
The SVG frame and font are shared with the bench's charts (bench/suite_plots.py).
"""

from __future__ import annotations

from typing import Any
from xml.sax.saxutils import escape, quoteattr

BAR_HEIGHT, BAR_GAP = 22, 10
LABEL_WIDTH, PLOT_WIDTH, VALUE_WIDTH = 190, 300, 190
TOP, BOTTOM = 44, 16
FONT = 'font-family="sans-serif" font-size="11"'
COLORS = {"Triton": "#dd8452", "eager": "#8c8c8c", "torch.compile": "#4c72b0", "torch.compile (max-autotune)": "#8172b3"}


def timing_chart(report: dict[str, Any]) -> str | None:
    """Time per call of each contender, with Triton's speedup over each; None for a report without timing."""
    timing = report.get("timing")
    if not timing:
        return None
    bars = [("eager", timing["eager_ms"]), ("torch.compile", timing.get("compile_ms"))]
    if timing.get("compile_max_autotune_ms") is not None:
        bars.append(("torch.compile (max-autotune)", timing["compile_max_autotune_ms"]))
    bars = [(name, ms) for name, ms in bars if ms is not None] + [("Triton", timing["triton_ms"])]
    longest = max(ms for _, ms in bars)
    width = LABEL_WIDTH + PLOT_WIDTH + VALUE_WIDTH
    height = TOP + len(bars) * (BAR_HEIGHT + BAR_GAP) + BOTTOM
    title = f"{report['target']}: time per call on {report['device']['name']} (shorter is faster)"
    elements = [
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="12" y="26" font-family="sans-serif" font-size="14" font-weight="bold">{escape(title)}</text>',
    ]
    for row, (name, ms) in enumerate(bars):
        y = TOP + row * (BAR_HEIGHT + BAR_GAP)
        length = max(1.0, PLOT_WIDTH * ms / longest)
        value = f"{ms:.4g} ms" if name == "Triton" else f"{ms:.4g} ms (Triton {ms / timing['triton_ms']:.2f}x)"
        elements += [
            f'<text x="{LABEL_WIDTH - 8}" y="{y + 15}" text-anchor="end" {FONT}>{escape(name)}</text>',
            f'<rect class="bar" x="{LABEL_WIDTH}" y="{y}" width="{length:.1f}" height="{BAR_HEIGHT}" '
            f'fill="{COLORS[name]}"><title>{escape(f"{name}: {ms:.4g} ms")}</title></rect>',
            f'<text x="{LABEL_WIDTH + length + 6:.1f}" y="{y + 15}" {FONT}>{escape(value)}</text>',
        ]
    return svg_document(width, height, elements)


def svg_document(width: float, height: float, elements: list[str]) -> str:
    """A standalone SVG image, `width` x `height` pixels, of `elements` (SVG text) in order."""
    header = (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f"viewBox={quoteattr(f'0 0 {width} {height}')}>"
    )
    return "\n".join([header, *elements, "</svg>"]) + "\n"
