"""delphi's part of the views: a table per round (expert, status, changed?, the analysis),
the round's outcome under it, its plain lines and its summary fields.

From round 2 an expert's reply is a JSON object, so the table previews the analysis the
contribution event carries rather than the raw reply. Expert text is always `Text`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.text import Text

from panel_cli.view import fmt
from panel_cli.view.tables import (
    LATENCY_WIDTH,
    TEXT_WIDTH,
    TOKENS_WIDTH,
    CallRow,
    Column,
    Preview,
    RunSoFar,
    StageState,
    fitted_table,
    member_cell,
    preview_cell,
    status_column,
    tools_columns,
    warning_line,
)

if TYPE_CHECKING:
    from panel_cli.events import ContributionMade, DelphiRoundEnded


def contribution_stage(stage: str, round_: int | None, seen: RunSoFar) -> StageState:
    """A Delphi round. Only the first round's calls may use tools: a revision is a structured
    reply (docs/protocols.md#delphi)."""
    return ContributionStage(stage, round_, tool_use=round_ in (None, 1))


@dataclass
class ContributionStage(StageState):
    """A Delphi round: the common call rows, each expert's contribution, and how the round ended."""

    contributions: dict[str, ContributionMade] = field(default_factory=dict)
    ended: DelphiRoundEnded | None = None

    def contribute(self, event: ContributionMade) -> None:
        self.contributions[event.expert] = event
        self.member_row(event.expert, event.label).label = event.label

    def render(self) -> RenderableType:
        parts: list[RenderableType] = [ContributionTable(self)]
        if self.ended is not None:
            parts.append(round_note(self.ended))
        parts += [warning_line(warning) for warning in self.warnings]
        return Group(*parts)


class ContributionTable:
    """Laid out for the width it is drawn at, like every stage table: on a narrow terminal
    tokens and latency go first, the expert, its status and `changed?` stay."""

    def __init__(self, stage: ContributionStage) -> None:
        self.stage = stage

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield fitted_table(self.stage.title, self.columns(), len(self.stage.rows), options.max_width)

    def columns(self) -> list[Column]:
        rows = self.stage.rows
        now = self.stage.clock()
        found = [self.stage.contributions.get(row.name) if row.status == "answered" else None for row in rows]
        return [
            Column("expert", [member_cell(row, False) for row in rows], keep=0, floor=self.stage.member_width()),
            status_column(rows),
            Column("changed?", [changed_cell(entry) for entry in found], keep=2),
            Column(
                "latency",
                [row.time_cell(now) for row in rows],
                keep=5,
                floor=LATENCY_WIDTH,
                justify="right",
            ),
            Column(
                "tokens",
                [Text("" if row.tokens is None else fmt.tokens(row.tokens)) for row in rows],
                keep=6,
                floor=TOKENS_WIDTH,
                justify="right",
            ),
            *tools_columns(self.stage, rows),
            Column(
                "analysis",
                [analysis_cell(row, entry) for row, entry in zip(rows, found, strict=True)],
                keep=4,
                shrink_to=TEXT_WIDTH,
                fill=True,
                style="dim",
            ),
        ]


def changed_cell(entry: ContributionMade | None) -> Text:
    """`yes` / `no`; `first` in round 1; a reply that was not the structured object says so."""
    if entry is None:
        return Text("")
    if entry.changed is None:
        return Text("first", style="dim")
    cell = Text("yes", style="cyan") if entry.changed else Text("no", style="green")
    if not entry.structured:
        cell.append(" (unstructured)", style="yellow")
    return cell


def analysis_cell(row: CallRow, entry: ContributionMade | None) -> Preview:
    if entry is None:
        return preview_cell(row)
    return Preview(Text(fmt.one_line(entry.analysis)), Text(" (truncated)", style="yellow") if row.truncated else None)


def round_note(ended: DelphiRoundEnded) -> Text:
    """`3 of 3 experts contributed · every one reports no change: no further round`."""
    note = Text(f"{ended.contributed} of {ended.experts} experts contributed", style="dim")
    if ended.contributed == 0:
        note.append(" · the rounds stop here", style="yellow")
    elif ended.unchanged:
        note.append(" · every one reports no change", style="green")
        if ended.early_stop:
            note.append(": no further round", style="green")
    return note


def _contribution_line(event: ContributionMade) -> str:
    """`[round 2] contribution  ann (Expert A)  unchanged`."""
    state = "first contribution" if event.changed is None else "changed" if event.changed else "unchanged"
    state += "" if event.structured else " (unstructured reply)"
    return f"[round {event.round}] contribution  {event.expert} (Expert {event.label})  {state}"


def _round_ended_line(event: DelphiRoundEnded) -> str:
    """`round 2 ended: 3 of 3 experts contributed, every one reports no change`."""
    line = f"round {event.round} ended: {event.contributed} of {event.experts} experts contributed"
    if event.contributed and event.unchanged:
        line += ", every one reports no change"
    return line + (" -> no further round" if event.early_stop else "")


# The plain view's line for each delphi event.
PLAIN_LINES: dict[str, Callable[[Any], str]] = {
    "delphi_contribution": _contribution_line,
    "delphi_round_ended": _round_ended_line,
}
