"""A system's reliability diagram on the terminal: a row per bin of confidence that holds any
answer, its accuracy as a bar and its mean stated confidence as `│` on it, so a confidence that
is a probability shows the mark at the bar's end, and an overconfident one the mark past it.
The same lines go into a Markdown report as its picture (`plain`)."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text

from panel_cli.eval.reliability import ReliabilityBin

BAR = 20
HEADER = "confidence  answers  stated  right"
LEGEND = "█ the share right, │ the mean confidence stated: calibrated, the mark sits at the bar's end"


def reliability_chart(bins: Sequence[ReliabilityBin], width: int = BAR) -> Text:
    """The bins that hold answers, highest confidence first."""
    chart = Text(f"{HEADER}  {'right (│ stated)':<{width}}\n", style="dim")
    for row in sorted(bins, key=lambda found: -found.low):
        if not row.count or row.accuracy is None or row.mean_confidence is None:
            continue
        chart.append(
            f"{row.low:.1f}–{row.high:.1f}    {row.count:>7,}  {row.mean_confidence:>6.3f}  {row.accuracy:>5.3f}  "
        )
        chart.append_text(_bar(row.accuracy, row.mean_confidence, width))
        chart.append("\n")
    chart.append(LEGEND, style="dim")
    return chart


def _bar(accuracy: float, stated: float, width: int) -> Text:
    bar = Text()
    mark = min(width - 1, int(stated * width))
    for index in range(width):
        middle = (index + 0.5) / width
        if index == mark:
            bar.append("│", style="bold magenta")
        elif middle <= accuracy:
            bar.append("█", style="green")
        else:
            bar.append("·", style="dim")
    return bar
