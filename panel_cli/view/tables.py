"""What the live view knows about one stage, and how it draws it.

A stage (confer's round 0 `answer` or a `vote` round, council's answers or reviews, …) is a
table with one row per member, plus the round's tally, an aggregate ranking and the
warnings raised meanwhile, so a finished stage prints as one block. User text (answers,
names, warnings) always goes in as `Text`, never as markup, so a `[` in an answer is a `[`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from panel_cli.events import CallFailed, CallFinished, RoundTallied, VoteCast, WarningRaised
from panel_cli.view import fmt

Status = Literal["waiting", "answered", "failed", "timed out", "cancelled"]

STATUS_STYLES: dict[Status, str] = {
    "waiting": "dim",
    "answered": "green",
    "failed": "bold red",
    "timed out": "yellow",
    "cancelled": "dim",
}
FAILURE_STATUS: dict[str, Status] = {"timeout": "timed out", "cancelled": "cancelled"}
BAR_WIDTH = 24


@dataclass
class MemberRow:
    name: str
    label: str | None = None
    status: Status = "waiting"
    latency: float | None = None
    tokens: int | None = None
    preview: str = ""
    vote: VoteCast | None = None
    ranking: list[str] | None = None

    def finish(self, event: CallFinished) -> None:
        self.status = "answered"
        self.latency = event.latency
        if event.tokens_in is not None or event.tokens_out is not None:
            self.tokens = (event.tokens_in or 0) + (event.tokens_out or 0)
        self.preview = fmt.one_line(event.text)

    def fail(self, event: CallFailed) -> None:
        self.status = FAILURE_STATUS.get(event.kind, "failed")
        self.latency = event.latency
        self.preview = "" if event.kind == "cancelled" else fmt.one_line(f"{event.kind}: {event.message}")


@dataclass
class StageState:
    stage: str
    round: int | None
    rows: dict[str, MemberRow] = field(default_factory=dict)
    tally: RoundTallied | None = None
    aggregate: list[dict[str, Any]] = field(default_factory=list)
    warnings: list[WarningRaised] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, int | None]:
        return (self.stage, self.round)

    @property
    def title(self) -> str:
        return self.stage if self.round is None else f"round {self.round} · {self.stage}"

    @property
    def progress(self) -> str:
        done = sum(row.status != "waiting" for row in self.rows.values())
        return f"{self.title} · {done}/{len(self.rows)} done"

    def add_member(self, name: str, label: str | None) -> MemberRow:
        if name not in self.rows:
            self.rows[name] = MemberRow(name, label)
        return self.rows[name]

    def render(self) -> RenderableType:
        parts: list[RenderableType] = [self._table()]
        if self.tally is not None:
            parts += [Text(), render_tally(self.tally)]
        if self.aggregate:
            parts += [Text(), render_aggregate(self.aggregate)]
        parts += [warning_line(warning) for warning in self.warnings]
        return Group(*parts)

    def _table(self) -> Table:
        rows = list(self.rows.values())
        show_vote = self.stage == "vote" or any(row.vote for row in rows)
        show_ranking = any(row.ranking is not None for row in rows)
        winner = self.tally.winner if self.tally else None

        table = Table(title=Text(self.title, style="bold"), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
        table.add_column("member", no_wrap=True)
        table.add_column("status", no_wrap=True)
        table.add_column("latency", justify="right", no_wrap=True)
        table.add_column("tokens", justify="right", no_wrap=True)
        if show_vote:
            table.add_column("vote", no_wrap=True)
        if show_ranking:
            table.add_column("ranking", no_wrap=True)
        # The only column allowed to shrink on a narrow terminal; its cells still stay one line.
        table.add_column("rationale" if show_vote else "answer", min_width=16, style="dim")

        for row in rows:
            member = Text.assemble((f"{row.label} ", "cyan") if row.label else "", row.name)
            if row.name == winner:
                member.stylize("bold green")
                member.append(" ★", style="bold green")
            cells: list[RenderableType] = [
                member,
                Text(row.status, style=STATUS_STYLES[row.status]),
                Text("" if row.latency is None else fmt.seconds(row.latency)),
                Text("" if row.tokens is None else fmt.tokens(row.tokens)),
            ]
            if show_vote:
                cells.append(vote_cell(row.vote))
            if show_ranking:
                cells.append(Text(", ".join(row.ranking or [])))
            cells.append(preview_cell(row))
            table.add_row(*cells)
        return table


def preview_cell(row: MemberRow) -> Text:
    """A vote round's call text is the structured vote itself (JSON); its rationale reads better."""
    failed = row.status in ("failed", "timed out")
    text = fmt.one_line(row.vote.rationale) if row.vote and row.vote.rationale else row.preview
    return Text(text, style="red" if failed else "", no_wrap=True, overflow="ellipsis")


def vote_cell(vote: VoteCast | None) -> Text:
    """`→ B 80`; a fallback vote (the member kept its own answer at 50) is marked as such."""
    if vote is None:
        return Text("")
    cell = Text.assemble(("→ ", "dim"), (vote.choice, "bold"))
    if vote.confidence is not None:
        cell.append(f" {fmt.number(vote.confidence)}")
    if vote.fallback:
        cell.append(" (kept own)", style="yellow")
    return cell


def render_tally(tally: RoundTallied) -> Table:
    """One bar per label, as long as its summed confidence, named by its author (the user may
    see who wrote what; only the members may not); the winner's in bold green."""
    grid = Table.grid(padding=(0, 1), pad_edge=True)
    top = max(tally.scores.values(), default=0) or 1
    for label, score in sorted(tally.scores.items()):
        won = label == tally.winner_label
        style = "bold green" if won else "cyan"
        bar = "█" * max(round(score / top * BAR_WIDTH), 1 if score > 0 else 0)
        grid.add_row(
            Text.assemble((label, "bold"), (f" {tally.authors[label]}" if label in tally.authors else "", "dim")),
            Text(bar.ljust(BAR_WIDTH), style=style),
            Text(fmt.number(score), style=style, justify="right"),
            Text(f"winner: {tally.winner}" if won and tally.winner else "", style=style),
        )
    if tally.winner_label is None:
        grid.add_row(Text("no winner this round", style="yellow"))
    return grid


def render_aggregate(aggregate: list[dict[str, Any]]) -> Table:
    """The council's aggregate ranking, best first; the bar is longer for a better (lower) average."""
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


def warning_line(warning: WarningRaised) -> Text:
    return Text.assemble(" ⚠ ", (f"{warning.member}: " if warning.member else ""), warning.message, style="yellow")
