"""council's part of the live view: a review stage's table (each reviewer's ranking beside its
review) and, under it once every review is in, the aggregate ranking."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich import box
from rich.console import RenderableType
from rich.table import Table
from rich.text import Text

from panel_cli.view import fmt
from panel_cli.view.tables import BAR_WIDTH, RunSoFar, StageState


def review_stage(stage: str, round_: int | None, seen: RunSoFar) -> StageState:
    """council's reviews: each reviewer's ranking beside its review, then the aggregate."""
    return ReviewStage(stage, round_, text_header="review", rankings=True, tool_use=False)


@dataclass
class ReviewStage(StageState):
    """A council review stage; `aggregate` is the ranking of every review, once it is in."""

    aggregate: list[dict[str, Any]] | None = None

    def outcome(self) -> list[RenderableType]:
        parts = super().outcome()
        if self.aggregate is not None:
            parts += [Text(), render_aggregate(self.aggregate)]
        return parts


def render_aggregate(aggregate: list[dict[str, Any]]) -> RenderableType:
    """The council's aggregate ranking, best first; the bar is longer for a better (lower)
    average. An empty one says why, rather than print a heading over nothing."""
    if not aggregate:
        return Text(fmt.NO_AGGREGATE, style="yellow")
    table = Table(
        title=Text("aggregate ranking", style="bold"), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False
    )
    table.add_column("#", justify="right")
    table.add_column("member", no_wrap=True)
    table.add_column("label")
    table.add_column("avg rank", justify="right")
    table.add_column("rankings", justify="right")
    table.add_column("", no_wrap=True)
    worst = max(len(aggregate), 1)
    for place, entry in enumerate(aggregate, start=1):
        average = entry.get("average_rank")
        length = 0 if average is None else round((worst + 1 - float(average)) / worst * BAR_WIDTH)
        style = "bold green" if place == 1 else "cyan"
        table.add_row(
            Text(str(place)),
            Text(str(entry.get("name", "")), style="bold" if place == 1 else ""),
            Text(str(entry.get("label") or "")),
            Text(fmt.UNKNOWN if average is None else f"{float(average):.2f}"),
            Text(str(entry.get("count", ""))),
            Text("█" * max(length, 0), style=style),
        )
    return table
