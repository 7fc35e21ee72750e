"""The bench's two charts as self-written SVG: speedup vs torch.compile, and position against the ceilings.

No plotting library (the GPU machine cannot install one): plain SVG elements, one `<rect class="bar">`
per problem drawn, each with a `<title>` tooltip naming the problem and its value.
"""

from __future__ import annotations

import math
from typing import Any
from xml.sax.saxutils import escape

from drtriton_lsp.bench.roofline import BANDWIDTH_TARGET, LIBRARY_TARGET
from drtriton_lsp.engine.report_chart import FONT, svg_document

CATEGORY_COLORS = {
    "single_op": "#4c72b0",
    "fusion": "#dd8452",
    "cnn": "#55a868",
    "transformer": "#c44e52",
    "gemm": "#8172b3",
    "loss": "#937860",
    "rnn": "#da8bc3",
    "network": "#ccb974",
}
OTHER_COLOR = "#8c8c8c"
CEILING_COLORS = {"copy": "#55a868", "library": "#8172b3"}
TARGET_COLORS = {"copy": "#2d6a3e", "library": "#4b3f80"}
BAR_PITCH = 22  # horizontal pixels per problem
PLOT_HEIGHT = 260
LABEL_CHARACTERS = 36  # longer problem names are cut, so the vertical labels fit below the plot
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP = 64, 84, 56
MARGIN_BOTTOM = 12 + 6 * LABEL_CHARACTERS + 36  # vertical labels, then up to two lines of notes


def speedup_chart(records: list[dict[str, Any]], title: str) -> str:
    """Sorted bars of Triton's speedup vs torch.compile on a log scale, from 1x up or down."""
    drawn = sorted(
        (r for r in records if r["timing"] and r["timing"].get("speedup_vs_compile")),
        key=lambda r: r["timing"]["speedup_vs_compile"],
    )
    left_out = len(records) - len(drawn)
    if not drawn:
        return _empty_chart(title, "no speed measured: " + ("no problem was timed" if records else "no problems"))
    speedups = [r["timing"]["speedup_vs_compile"] for r in drawn]
    low = 2.0 ** math.floor(math.log2(min(min(speedups), 1.0) * 0.95))
    high = 2.0 ** math.ceil(math.log2(max(max(speedups), 1.0) * 1.05))
    if high == low:
        high *= 2

    def y_of(value: float) -> float:
        share = (math.log2(value) - math.log2(low)) / (math.log2(high) - math.log2(low))
        return MARGIN_TOP + PLOT_HEIGHT * (1 - share)

    canvas = _Canvas(len(drawn), title)
    tick = low
    while tick <= high * 1.0001:
        canvas.y_tick(y_of(tick), f"{tick:g}x", emphasised=tick == 1.0)
        tick *= 2
    canvas.y_label("speedup vs torch.compile (log scale)")
    geomean = math.exp(sum(math.log(value) for value in speedups) / len(speedups))
    canvas.reference_line(y_of(geomean), "#333333", f"geomean {geomean:.2f}x")
    for index, record in enumerate(drawn):
        speedup = record["timing"]["speedup_vs_compile"]
        top, bottom = sorted((y_of(speedup), y_of(1.0)))
        color = CATEGORY_COLORS.get(record["category"], OTHER_COLOR)
        canvas.bar(index, top, max(bottom - top, 1.0), color, f"{record['problem']}: {speedup:.2f}x vs torch.compile")
        canvas.x_label(index, record["problem"])
    drawn_categories = {r["category"] for r in drawn}
    legend = [(color, name.replace("_", "-")) for name, color in CATEGORY_COLORS.items() if name in drawn_categories]
    if any(r["category"] not in CATEGORY_COLORS for r in drawn):
        legend.append((OTHER_COLOR, "other"))
    canvas.legend(legend)
    if left_out:
        canvas.note(f"{left_out} problem(s) not drawn: not verified, or torch.compile not timed")
    return canvas.render()


def roofline_chart(records: list[dict[str, Any]], title: str) -> str:
    """Per problem, the fraction of its ceiling Triton reaches (copy bandwidth, or the library's
    matmul rate for matmul-class problems), with torch.compile's fraction as a tick and the targets as lines."""
    drawn = sorted(
        (r for r in records if r["roofline"] and r["roofline"]["fraction"] is not None),
        key=lambda r: r["roofline"]["fraction"],
    )
    left_out = len(records) - len(drawn)
    if not drawn:
        return _empty_chart(title, "no ceiling measured: " + ("no problem was timed" if records else "no problems"))
    values = [r["roofline"]["fraction"] for r in drawn] + [
        r["roofline"]["compile_fraction"] for r in drawn if r["roofline"]["compile_fraction"] is not None
    ]
    high = max(1.0, math.ceil(max(values) * 5) / 5)  # a whole number of 20 % ticks

    def y_of(value: float) -> float:
        return MARGIN_TOP + PLOT_HEIGHT * (1 - value / high)

    canvas = _Canvas(len(drawn), title)
    steps = int(round(high / 0.2))
    for step in range(steps + 1):
        value = step * 0.2
        canvas.y_tick(y_of(value), f"{value * 100:.0f}%", emphasised=abs(value - 1.0) < 1e-9)
    canvas.y_label("fraction of the ceiling")
    for ceiling, target in (("copy", BANDWIDTH_TARGET), ("library", LIBRARY_TARGET)):
        if any(r["roofline"]["ceiling"] == ceiling for r in drawn):
            canvas.reference_line(y_of(target), TARGET_COLORS[ceiling], f"target {target:.0%}")
    for index, record in enumerate(drawn):
        position = record["roofline"]
        fraction = position["fraction"]
        ceiling_name = "copy bandwidth" if position["ceiling"] == "copy" else "library matmul rate"
        canvas.bar(
            index,
            y_of(fraction),
            max(y_of(0.0) - y_of(fraction), 1.0),
            CEILING_COLORS[position["ceiling"]],
            f"{record['problem']}: {fraction:.0%} of {ceiling_name}",
        )
        if position["compile_fraction"] is not None:
            canvas.marker(index, y_of(position["compile_fraction"]), f"torch.compile: {position['compile_fraction']:.0%}")
        canvas.x_label(index, record["problem"])
    canvas.legend(
        [
            (CEILING_COLORS["copy"], "Triton vs copy bandwidth"),
            (CEILING_COLORS["library"], "Triton vs library matmul"),
            ("#000000", "torch.compile (tick)"),
        ]
    )
    if left_out:
        canvas.note(f"{left_out} problem(s) not drawn: not verified, not timed, or no ceiling measured")
    return canvas.render()


class _Canvas:
    """A plot area of `columns` bars with axes, labels and a legend, rendered as one SVG document."""

    def __init__(self, columns: int, title: str):
        self.columns = columns
        self.width = MARGIN_LEFT + MARGIN_RIGHT + max(columns, 12) * BAR_PITCH
        self.height = MARGIN_TOP + PLOT_HEIGHT + MARGIN_BOTTOM
        self.elements = [
            f'<rect x="0" y="0" width="{self.width}" height="{self.height}" fill="#ffffff"/>',
            f'<text x="{MARGIN_LEFT}" y="20" font-family="sans-serif" font-size="14" font-weight="bold">{escape(title)}</text>',
        ]
        self.notes = 0

    def y_tick(self, y: float, label: str, emphasised: bool = False) -> None:
        right = self.width - MARGIN_RIGHT
        stroke = 'stroke="#333333" stroke-width="1.2"' if emphasised else 'stroke="#dddddd" stroke-width="1"'
        self.elements.append(f'<line x1="{MARGIN_LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" {stroke}/>')
        self.elements.append(
            f'<text x="{MARGIN_LEFT - 6}" y="{y + 4:.1f}" text-anchor="end" {FONT}>{escape(label)}</text>'
        )

    def y_label(self, text: str) -> None:
        middle = MARGIN_TOP + PLOT_HEIGHT / 2
        self.elements.append(
            f'<text x="14" y="{middle:.1f}" transform="rotate(-90 14 {middle:.1f})" text-anchor="middle" {FONT}>'
            f"{escape(text)}</text>"
        )

    def reference_line(self, y: float, color: str, label: str) -> None:
        right = self.width - MARGIN_RIGHT
        self.elements.append(
            f'<line x1="{MARGIN_LEFT}" y1="{y:.1f}" x2="{right}" y2="{y:.1f}" stroke="{color}" '
            'stroke-width="1.5" stroke-dasharray="6 4"/>'
        )
        self.elements.append(f'<text x="{right + 4}" y="{y + 4:.1f}" fill="{color}" {FONT}>{escape(label)}</text>')

    def bar(self, index: int, top: float, height: float, color: str, tooltip: str) -> None:
        x = MARGIN_LEFT + index * BAR_PITCH + 3
        self.elements.append(
            f'<rect class="bar" x="{x:.1f}" y="{top:.1f}" width="{BAR_PITCH - 6}" height="{height:.1f}" '
            f'fill="{color}"><title>{escape(tooltip)}</title></rect>'
        )

    def marker(self, index: int, y: float, tooltip: str) -> None:
        x = MARGIN_LEFT + index * BAR_PITCH
        self.elements.append(
            f'<line class="marker" x1="{x + 1:.1f}" y1="{y:.1f}" x2="{x + BAR_PITCH - 1:.1f}" y2="{y:.1f}" '
            f'stroke="#000000" stroke-width="2"><title>{escape(tooltip)}</title></line>'
        )

    def x_label(self, index: int, text: str) -> None:
        x = MARGIN_LEFT + index * BAR_PITCH + BAR_PITCH / 2 + 4
        y = MARGIN_TOP + PLOT_HEIGHT + 8
        self.elements.append(
            f'<text x="{x:.1f}" y="{y:.1f}" transform="rotate(-90 {x:.1f} {y:.1f})" text-anchor="end" {FONT}>'
            f"{escape(_short(text))}</text>"
        )

    def legend(self, entries: list[tuple[str, str]]) -> None:
        x = MARGIN_LEFT
        for color, label in entries:
            self.elements.append(f'<rect x="{x}" y="32" width="10" height="10" fill="{color}"/>')
            self.elements.append(f'<text x="{x + 14}" y="41" {FONT}>{escape(label)}</text>')
            x += 24 + 7 * len(label)

    def note(self, text: str) -> None:
        self.notes += 1
        y = self.height - 8 - 14 * (self.notes - 1)
        self.elements.append(f'<text x="{MARGIN_LEFT}" y="{y}" fill="#555555" {FONT}>{escape(text)}</text>')

    def render(self) -> str:
        return svg_document(self.width, self.height, self.elements)


def _empty_chart(title: str, message: str) -> str:
    width, height = 520, 120
    elements = [
        f'<rect x="0" y="0" width="{width}" height="{height}" fill="#ffffff"/>',
        f'<text x="16" y="28" font-family="sans-serif" font-size="14" font-weight="bold">{escape(title)}</text>',
        f'<text x="16" y="64" {FONT}>{escape(message)}</text>',
    ]
    return svg_document(width, height, elements)


def _short(name: str, limit: int = LABEL_CHARACTERS) -> str:
    """A problem's file name without ".py", shortened for an axis label."""
    stem = name.removesuffix(".py")
    return stem if len(stem) <= limit else stem[: limit - 1] + "…"
