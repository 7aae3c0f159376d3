"""A system's reliability diagram in an export: an SVG for the HTML page (the share right in each
bin of stated confidence, against the diagonal a probability would follow), and a table with the
terminal's chart beneath it for Markdown. Only numbers reach these: no text to escape but the
system's name, which goes through `esc`."""

from __future__ import annotations

from collections.abc import Sequence

from panel_cli.eval.reliability import ReliabilityBin
from panel_cli.export.markdown import table
from panel_cli.export.page import esc
from panel_cli.view.reliability import reliability_chart

SIZE = 220
MARGIN = 34


def reliability_svg(bins: Sequence[ReliabilityBin], name: str) -> str:
    """A square plot: x the confidence stated, y the share right; a bar per bin that holds any
    answer, as wide as its bin and as dark as its share of the answers, its mean confidence
    marked; the dashed diagonal is where a probability lies."""
    total = sum(row.count for row in bins) or 1
    plot = SIZE - 2 * MARGIN

    def x(value: float) -> float:
        return MARGIN + value * plot

    def y(value: float) -> float:
        return SIZE - MARGIN - value * plot

    parts = [
        f'<svg class="reliability" width="{SIZE}" height="{SIZE}" viewBox="0 0 {SIZE} {SIZE}" role="img" '
        f'aria-label="reliability of {esc(name)}">',
        f'<rect class="frame" x="{MARGIN}" y="{MARGIN}" width="{plot}" height="{plot}"></rect>',
    ]
    for row in bins:
        if not row.count or row.accuracy is None or row.mean_confidence is None:
            continue
        opacity = 0.25 + 0.75 * row.count / total
        parts.append(
            f'<rect class="right" x="{x(row.low):.1f}" y="{y(row.accuracy):.1f}" width="{x(row.high) - x(row.low):.1f}" '
            f'height="{y(0) - y(row.accuracy):.1f}" fill-opacity="{opacity:.2f}">'
            f"<title>{row.low:.1f}–{row.high:.1f}: {row.count} answers, stated {row.mean_confidence:.3f}, "
            f"right {row.accuracy:.3f}</title></rect>"
        )
        parts.append(
            f'<circle class="stated" cx="{x(row.mean_confidence):.1f}" cy="{y(row.accuracy):.1f}" r="2.5"></circle>'
        )
    parts += [
        f'<line class="diagonal" x1="{x(0)}" y1="{y(0)}" x2="{x(1)}" y2="{y(1)}"></line>',
        f'<text x="{SIZE / 2}" y="{SIZE - 8}" text-anchor="middle">confidence stated</text>',
        f'<text x="12" y="{SIZE / 2}" text-anchor="middle" transform="rotate(-90 12 {SIZE / 2})">share right</text>',
        f'<text x="{x(0)}" y="{y(0) + 14}" text-anchor="middle">0</text>',
        f'<text x="{x(1)}" y="{y(0) + 14}" text-anchor="middle">1</text>',
        f'<text x="{x(0) - 8}" y="{y(1) + 4}" text-anchor="end">1</text>',
        "</svg>",
    ]
    return "".join(parts)


def reliability_markdown(bins: Sequence[ReliabilityBin]) -> str:
    """The bins that hold answers as a table, then the terminal's chart as the picture."""
    rows = [
        [
            f"{row.low:.1f}–{row.high:.1f}",
            f"{row.count:,}",
            f"{row.mean_confidence:.3f}",
            f"{row.accuracy:.3f}",
            f"{row.accuracy - row.mean_confidence:+.3f}",
        ]
        for row in sorted(bins, key=lambda found: -found.low)
        if row.count and row.accuracy is not None and row.mean_confidence is not None
    ]
    grid = table(["confidence", "answers", "mean stated", "share right", "right − stated"], rows, numeric={1, 2, 3, 4})
    return f"{grid}\n\n```text\n{reliability_chart(bins).plain}\n```"
