"""What the live view knows about one stage, and how it draws it.

A stage (confer's round 0 `answer` or a `vote` round, council's answers or reviews, …) is a
table with one row per call, plus what the stage came to (a tally; a protocol's own stage view
draws its own: `panel_cli.view.confer`, `council`, …) and the warnings raised meanwhile, so a
finished stage prints as one block. User text (answers, names,
warnings) always goes in as `Text`, never as markup, so a `[` in an answer is a `[`.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from rich import box
from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.table import Table
from rich.text import Text

from panel_cli.view import fmt
from panel_cli.view.output import NO_LIMIT

if TYPE_CHECKING:
    # Only named: `panel history show` draws these tables from stored payloads read back
    # without their models (view/history_stages.py), and so without importing them.
    from panel_cli.events import (
        CallFailed,
        CallFinished,
        MemberSkipped,
        PlanAccepted,
        RoundTallied,
        VerdictGiven,
        VoteCast,
        WarningRaised,
    )
    from panel_cli.view.stored import Stored
    from panel_cli.view.tools import ToolActivity

Status = Literal[
    "waiting", "writing", "answered", "failed", "timed out", "cancelled", "skipped", "no reply", "not asked"
]

STATUS_STYLES: dict[Status, str] = {
    "waiting": "dim",
    "writing": "cyan",
    "answered": "green",
    "failed": "bold red",
    "timed out": "yellow",
    "cancelled": "dim",
    "skipped": "dim",
    "no reply": "yellow",
    "not asked": "dim",
}
FAILURE_STATUS: dict[str, Status] = {"timeout": "timed out", "cancelled": "cancelled"}
BAR_WIDTH = 24
TRUNCATED = " (truncated)"
WINNER = "★"
# How much of a reply still being written its row keeps: more than any cell shows.
TAIL = fmt.CELL_TEXT


@dataclass
class CallRow:
    """One row of a stage: a member announced by the stage and still waiting, or one call.
    `about` is what the call is about when a member makes several (a judge scoring each
    response), so each of those calls has a row of its own. `writing`: its reply is being
    streamed, and `preview` is the end of the text so far (the words arriving). `started`: when
    its call started, by its stage's clock, while a live view draws it: a row still waiting or
    writing shows how long its call has run."""

    name: str
    label: str | None = None
    about: str | None = None
    call_id: str | None = None
    status: Status = "waiting"
    started: float | None = None
    latency: float | None = None
    tokens: int | None = None
    preview: str = ""
    truncated: bool = False
    vote: VoteCast | None = None
    ranking: list[str] | None = None
    tools: list[ToolActivity] = field(default_factory=list)

    @property
    def free(self) -> bool:
        """An announced row that no call (nor a skip) has claimed yet."""
        return self.call_id is None and self.status == "waiting"

    @property
    def pending(self) -> bool:
        return self.status in ("waiting", "writing")

    def time_shown(self, now: float) -> str:
        """Its latency once it has ended; while it runs, how long so far, in whole seconds (so
        the row changes once a second, not on every frame)."""
        if self.latency is not None:
            return fmt.seconds(self.latency)
        if self.pending and self.started is not None:
            return fmt.running(now - self.started)
        return ""

    def time_cell(self, now: float) -> Text:
        """`time_shown` as its cell: a running time dim, as what is not final yet."""
        return Text(self.time_shown(now), style="dim" if self.latency is None else "")

    def grow(self, text: str) -> None:
        """The reply so far; a reply already finished or failed stays as it ended."""
        if self.pending:
            self.status = "writing"
            self.preview = fmt.one_line(text[-TAIL:], TAIL)

    def finish(self, event: CallFinished) -> None:
        self.status = "answered"
        self.latency = event.latency
        if event.tokens_in is not None or event.tokens_out is not None:
            self.tokens = (event.tokens_in or 0) + (event.tokens_out or 0)
        self.truncated = event.truncated
        self.preview = fmt.one_line(event.text)

    def fail(self, event: CallFailed) -> None:
        """Shows the clean `message`; the provider's raw `detail` is for the store only."""
        self.status = FAILURE_STATUS.get(event.kind, "failed")
        self.latency = event.latency
        self.preview = "" if event.kind == "cancelled" else fmt.one_line(f"{event.kind}: {event.message}")

    def skip(self, event: MemberSkipped) -> None:
        self.status = "skipped"
        self.preview = fmt.one_line(event.reason)

    def abandon(self) -> None:
        """The run stopped (or its process died) while this call was out: it will never
        reply, and a stored run must not show it waiting for ever."""
        if self.pending:
            self.status = "no reply"


@dataclass
class RunSoFar:
    """What the live view has seen of a run that a stage's table draws from: the accepted plan
    (orchestrate), every verdict so far (supervise), and the members a tool server serves."""

    plan: PlanAccepted | None = None
    verdicts: list[VerdictGiven] = field(default_factory=list)
    equipped: set[str] = field(default_factory=set)

    def serves(self, members: list[str]) -> bool:
        """Whether a tool server serves one of a stage's members (any, for a stage that named none)."""
        return any(name in self.equipped for name in members) if members else bool(self.equipped)


@dataclass
class StageState:
    """A stage as the live view has seen it so far. What its table shows is fixed when it
    opens, by the stage's table the protocol declares (`stage_views`): `votes` (a vote per
    row; the text is the voter's reason), `rankings` (a reviewer's ranking per row),
    `tool_use` (whether its calls may call tools), and the header of its text column. The live
    view sets `shown` (the labels the stage shows its members) and `equipped` (a tool server
    serves one of its members) as it opens, so no column appears or vanishes while it runs."""

    stage: str
    round: int | None
    rows: list[CallRow] = field(default_factory=list)
    tally: RoundTallied | None = None
    warnings: list[WarningRaised | Stored] = field(default_factory=list)
    text_header: str = "answer"
    votes: bool = False
    rankings: bool = False
    tool_use: bool = True
    shown: list[str] = field(default_factory=list)
    equipped: bool = False
    announced: int = 0  # the widest member cell the stage announced
    # What a running call's time is measured by (`CallRow.started`).
    clock: Callable[[], float] = field(default=time.monotonic, repr=False, compare=False)

    @property
    def uses_tools(self) -> bool:
        return self.tool_use and self.equipped

    def member_width(self) -> int:
        """Room for the names the stage announced, and for the label each gets once the rankings
        are in (`A sage`), so naming the labels does not push the other columns aside."""
        labels = max((len(self.short(label)) + 1 for label in self.shown), default=0) if self.rankings else 0
        return self.announced + labels

    def short(self, entry: str) -> str:
        """A label the stage shows, without the noun all its labels share (`Model D` reads
        `D`), so a ranking fits beside the review; any other entry (a name) as it is."""
        if entry not in self.shown:
            return entry
        common = os.path.commonprefix(self.shown)
        return entry.removeprefix(common[: common.rfind(" ") + 1])

    def vote_width(self) -> int:
        """Room for a vote before any arrives: `→ A 100`."""
        return len("→ A 100")

    def label(self, name: str, label: str) -> None:
        """Name a member's label (council's, once its rankings are in) on the member's rows."""
        for row in self.rows:
            if row.name == name:
                row.label = label

    @property
    def key(self) -> tuple[str, int | None]:
        return (self.stage, self.round)

    @property
    def title(self) -> str:
        return self.stage if self.round is None else f"round {self.round} · {self.stage}"

    @property
    def progress(self) -> str:
        done = sum(not row.pending for row in self.rows)
        return f"{self.title} · {done}/{len(self.rows)} done"

    def announce(self, name: str, label: str | None) -> None:
        """A member the stage will call: a waiting row until its first call arrives."""
        if not any(row.name == name for row in self.rows):
            self.rows.append(CallRow(name, label))
            self.announced = max(self.announced, member_cell(self.rows[-1], False).cell_len)

    def member_row(self, name: str, label: str | None) -> CallRow:
        """The member's first row, for what belongs to the member rather than to one call
        (its vote, its ranking)."""
        for row in self.rows:
            if row.name == name:
                return row
        self.rows.append(CallRow(name, label))
        return self.rows[-1]

    def call_row(self, call_id: str, name: str, label: str | None, about: str | None) -> CallRow:
        """The call's row: the one it already has, else its member's row if no call has
        claimed it, else a new row."""
        for row in self.rows:
            if row.call_id == call_id:
                return row
        row = self._free_row(name, label)
        row.call_id, row.about = call_id, about
        return row

    def not_asked(self, names: list[str], reason: str) -> None:
        """Members a stopping rule (`stop:`) never asked: their rows say so, and why."""
        for name in names:
            row = self._free_row(name, None)
            row.status, row.preview = "not asked", fmt.one_line(reason)

    def skip(self, event: MemberSkipped, label: str | None) -> None:
        row = self._free_row(event.member, label)
        row.about = event.about
        row.skip(event)

    def _free_row(self, name: str, label: str | None) -> CallRow:
        for row in self.rows:
            if row.name == name and row.free:
                return row
        self.rows.append(CallRow(name, label))
        return self.rows[-1]

    def winner_rows(self) -> list[CallRow]:
        """Where the ★ goes: the rows about the winner when calls are about someone (a judge's
        scores), else the winner's own rows."""
        winner = self.tally.winner if self.tally else None
        if winner is None:
            return []
        if any(row.about for row in self.rows):
            return [row for row in self.rows if row.about == winner]
        return [row for row in self.rows if row.name == winner]

    def render(self) -> RenderableType:
        return Group(StageTable(self), *self.render_below())

    def render_below(self) -> list[RenderableType]:
        """What goes under the stage's table: the winner's legend, what the stage came to
        (`outcome`) and the warnings."""
        parts: list[RenderableType] = []
        if self.winner_rows():
            legend = "the round's winner" if self.round is not None else "the chosen response"
            parts.append(Text.assemble((f"{WINNER} ", "bold green"), (legend, "dim")))
        parts += self.outcome()
        parts += [warning_line(warning) for warning in self.warnings]
        return parts

    def outcome(self) -> list[RenderableType]:
        """What the stage came to, under its table: here a tally's scores (ensemble's choice,
        best first). A protocol's own stage draws its own (`panel_cli.view.confer`'s round
        tally, `panel_cli.view.council`'s aggregate ranking)."""
        if self.tally is None:
            return []
        order = fmt.tally_order(self.tally.scores, best_first=self.tally.round is None)
        return [Text(), render_tally(self.tally, order)]


@dataclass
class Column:
    """A table column and its cells. `keep` orders what a narrow terminal gives up first (the
    highest goes first; 0 is never dropped). `floor` is the width it takes before its cells
    arrive (the names the stage announced, the longest status, a latency's digits).
    `shrink_to` is how narrow it may be made, its cells cut with an ellipsis; None when it may
    not shrink at all. A `fill` column holds text: it takes the width the other columns leave,
    so a table spans the terminal from its first frame to its last."""

    header: str
    cells: Sequence[Text | Preview]
    keep: int
    floor: int = 0
    shrink_to: int | None = None
    fill: bool = False
    justify: Literal["left", "right"] = "left"
    style: str = ""

    @property
    def natural(self) -> int:
        """The width its cells need now."""
        return max([len(self.header), self.floor, *(cell.cell_len for cell in self.cells)])

    @property
    def wanted(self) -> int:
        """The width it asks for before its cells arrive (a text column: its least)."""
        return self.least if self.fill else max(len(self.header), self.floor)

    @property
    def least(self) -> int:
        """The narrowest it may be cut to."""
        if self.shrink_to is None:
            return max(len(self.header), self.floor)
        least = max(len(self.header), self.shrink_to)
        return least if self.fill else min(least, max(len(self.header), self.floor))


# Rich's SIMPLE_HEAD table without edges: one space of padding each side of a cell, and one
# space between columns.
CELL_PADDING = 2
SEPARATOR = 1
# A text column gives up to this much of its least width to a column whose cells came out
# longer than it asked for (a vote, a ranking), so that one stays whole beside a shorter text.
TEXT_GIVES = 8


def fit_columns(columns: list[Column], width: int) -> list[tuple[Column, int]]:
    """The columns shown at `width`, each with its width.

    Which columns: each asks for its `wanted` width; while they do not fit, the least needed
    one (the highest `keep`) is cut down to its least if it may shrink, and dropped if that is
    not enough, so a column is given up before a more needed one is cut. That is decided from
    widths known before any cell arrives, so a stage keeps its columns while it runs.

    How wide: the columns whose cells came out wider than they asked grow, most needed first,
    from the width left over and up to `TEXT_GIVES` of each text column's; the rest goes to
    the `fill` columns, so a table spans the width. The member and status columns are never
    dropped or cut, so a name is always whole."""
    kept = list(columns)
    widths = {id(column): column.wanted for column in kept}

    def over() -> int:
        return sum(widths[id(column)] + CELL_PADDING for column in kept) + SEPARATOR * (len(kept) - 1) - width

    for column in sorted(columns, key=lambda column: -column.keep):
        if over() <= 0:
            break
        if not column.fill:
            widths[id(column)] -= min(over(), widths[id(column)] - column.least)
        if over() > 0 and column.keep:
            kept.remove(column)
    fills = [column for column in kept if column.fill]
    spare = max(-over(), 0)
    budget = spare + TEXT_GIVES * len(fills)
    for column in sorted(kept, key=lambda column: column.keep):
        if not column.fill:
            grow = min(budget, max(column.natural - widths[id(column)], 0))
            widths[id(column)] += grow
            budget -= grow
    left = budget - TEXT_GIVES * len(fills)  # below zero: what the text columns gave
    for index, column in enumerate(fills):
        widths[id(column)] += left // len(fills) + (index < left % len(fills))
        if width >= NO_LIMIT:  # off a terminal with no width to fit: as wide as its cells need
            widths[id(column)] = min(widths[id(column)], column.natural)
    return [(column, widths[id(column)]) for column in kept]


def fitted_table(title: str, columns: list[Column], rows: int, width: int) -> Table:
    """A stage's table with the columns that fit `width` (`fit_columns`), as every stage
    table is drawn. A cell is one line (a tool cell one line per call): what does not fit is
    cut with an ellipsis, never wrapped, so a row keeps its height as the stage runs."""
    return laid_table(title, fit_columns(columns, width), rows)


def laid_table(title: str, fitted: list[tuple[Column, int]], rows: int) -> Table:
    """A stage's table of these columns at these widths (`fit_columns`)."""
    table = Table(title=Text(title, style="bold"), title_justify="left", box=box.SIMPLE_HEAD, show_edge=False)
    for column, size in fitted:
        table.add_column(
            column.header,
            justify=column.justify,
            style=column.style,
            width=size,
            no_wrap=True,
            overflow="ellipsis",
        )
    for index in range(rows):
        table.add_row(*(column.cells[index] for column, _ in fitted))
    return table


# The header of the column that shows a call's latency, or how long it has run so far.
LATENCY_HEADER = "latency"
# The widths a stage table keeps for its figures and statuses before any arrives.
STATUS_WIDTH = max(len(status) for status in STATUS_STYLES)
LATENCY_WIDTH = len("120.00s")
TOKENS_WIDTH = len("12,345")
# A tools cell: one line per call, cut to this width.
TOOLS_WIDTH = 48
# The narrowest a text column gets: narrower, it says too little to keep its place, and the
# figures (tokens, then latency) give way to it first.
TEXT_WIDTH = 20


class StageTable:
    """A stage's table, laid out for the width it is drawn at: Live redraws it on every
    refresh, so a resized terminal gets a new layout. Its columns are the stage's own
    (`StageState`), whatever has arrived so far."""

    def __init__(self, stage: StageState) -> None:
        self.stage = stage

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield fitted_table(self.stage.title, self.columns(), len(self.stage.rows), options.max_width)

    def columns(
        self, rows: list[CallRow] | None = None, *, starred: bool | None = None, now: float | None = None
    ) -> list[Column]:
        """The columns with a cell for each of `rows` (the stage's, by default); `starred`
        says whether those rows have the ★, when the caller knows; `now`, the stage's clock
        (read now, by default)."""
        stage = self.stage
        rows = stage.rows if rows is None else rows
        now = stage.clock() if now is None else now
        stars = {id(row) for row in stage.winner_rows()} if starred is None else {id(row) for row in rows if starred}
        columns = [
            Column("member", [member_cell(row, id(row) in stars) for row in rows], keep=0, floor=stage.member_width()),
            status_column(rows),
            Column(
                LATENCY_HEADER,
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
        ]
        if stage.votes:
            columns.append(
                Column(
                    "vote",
                    [vote_cell(row.vote, row.ranking) for row in rows],
                    keep=2,
                    floor=stage.vote_width(),
                    shrink_to=10,
                )
            )
        if stage.rankings:
            columns.append(
                Column(
                    "ranking",
                    [Text(", ".join(stage.short(entry) for entry in row.ranking or [])) for row in rows],
                    keep=3,
                    floor=len(", ".join(stage.short(label) for label in stage.shown)),
                    shrink_to=10,
                )
            )
        columns += tools_columns(stage, rows)
        columns.append(
            Column(
                stage.text_header,
                [self.text_cell(row) for row in rows],
                keep=4,
                shrink_to=TEXT_WIDTH,
                fill=True,
                style="dim",
            )
        )
        return columns

    def text_cell(self, row: CallRow) -> Preview:
        """The cell of the last column, the text (`fill`: it takes the width the others leave)."""
        return preview_cell(row)


def status_column(rows: list[CallRow]) -> Column:
    return Column(
        "status", [Text(row.status, style=STATUS_STYLES[row.status]) for row in rows], keep=0, floor=STATUS_WIDTH
    )


def tools_columns(stage: StageState, rows: list[CallRow]) -> list[Column]:
    """The `tools` column of a stage whose calls may use a tool server's tools: each call on a
    line of its own."""
    if not stage.uses_tools:
        return []
    from panel_cli.view.tools import tools_cell

    cells = [tools_cell(row.tools, TOOLS_WIDTH) for row in rows]
    return [Column("tools", cells, keep=3, floor=TOOLS_WIDTH, shrink_to=16)]


def member_cell(row: CallRow, starred: bool) -> Text:
    """`A alice`, or `A engineer → sage` for a call about sage's response; ★ on the winner."""
    cell = Text.assemble((f"{row.label} ", "cyan") if row.label else "", fmt.who(row.name, row.about))
    if starred:
        cell.stylize("bold green")
        cell.append(f" {WINNER}", style="bold green")
    return cell


def preview_cell(row: CallRow) -> Preview:
    """A vote round's call text is the structured vote itself (JSON); its rationale reads better.
    A truncated reply says so at the end of its preview."""
    failed = row.status in ("failed", "timed out")
    if row.status == "writing":
        return Preview(Text(row.preview), from_end=True)
    text = fmt.one_line(row.vote.rationale) if row.vote and row.vote.rationale else row.preview
    return Preview(
        Text(text, style="red" if failed else ""), Text(TRUNCATED, style="yellow") if row.truncated else None
    )


# The most characters of a preview measured for its column's width: wider than any cell.
MEASURED = 1_000


class Preview:
    """One line cut to its cell with an ellipsis, its `mark` (` (truncated)`) kept whole at
    the end however narrow the cell, since the mark is what must not be missed. `from_end`:
    a reply still being written shows its end, where the new words arrive, cut at the start."""

    def __init__(self, text: Text, mark: Text | None = None, *, from_end: bool = False) -> None:
        self.text = text
        self.mark = mark
        self.from_end = from_end

    @property
    def cell_len(self) -> int:
        """Measured on the first `MEASURED` characters at most: a cell is never wider, and
        measuring every reply whole on every frame was most of what a live table cost."""
        text = self.text if len(self.text) <= MEASURED else self.text[:MEASURED]
        return text.cell_len + (self.mark.cell_len if self.mark else 0)

    def plain_line(self, width: int) -> str | None:
        """What `__rich_console__` draws at `width`, before the cell cuts it, as a plain string,
        when that is simple to say (no mark, no styled part, ASCII where it is cut); None
        otherwise. The live area draws a row's line from it, every frame a row changes."""
        if self.mark is not None or self.text.spans or width < 2:
            return None
        plain = self.text.plain
        if not self.from_end:
            return plain[: width + 1] if plain[: width + 1].isascii() else None
        tail = plain[-width:]
        if not tail.isascii():
            return None
        return tail if len(plain) <= width else "…" + plain[1 - width :]

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> Iterator[Text]:
        line = self._within(options.max_width)
        if self.from_end and line.cell_len > options.max_width > 1:
            tail = line[len(line) - options.max_width + 1 :]
            while tail.cell_len > options.max_width - 1:
                tail = tail[1:]
            line = Text("…").append_text(tail)
        room = options.max_width - (self.mark.cell_len if self.mark else 0)
        if self.mark is not None and room > 0:
            line.truncate(room, overflow="ellipsis")
            line.append_text(self.mark)
        line.no_wrap, line.overflow = True, "ellipsis"
        yield line

    def _within(self, width: int) -> Text:
        """The text cut to a little more than `width` characters (ASCII is one cell a
        character; otherwise a few times that, as a character is at most two cells wide), its
        cut end marked, so what Rich measures and cuts on each frame is bounded by the cell
        rather than by the reply."""
        keep = max(width, 1) + 1
        plain = self.text.plain
        if not (plain[-keep:] if self.from_end else plain[:keep]).isascii():
            keep = 4 * keep
        if len(self.text) <= keep:
            return self.text.copy()
        if self.from_end:
            return Text("…").append_text(self.text[len(self.text) - keep :])
        return self.text[:keep].append("…")


def vote_cell(vote: VoteCast | None, ranking: list[str] | None = None) -> Text:
    """`→ B 80`; a ranked ballot's whole ranking, best first (`→ PostgreSQL > MySQL 80`); a
    fallback vote (the member kept its own answer at 50) is marked as such."""
    if vote is None:
        return Text("")
    cell = Text.assemble(("→ ", "dim"), (" > ".join(ranking) if ranking else vote.choice, "bold"))
    if vote.confidence is not None:
        cell.append(f" {fmt.number(vote.confidence)}")
    if vote.fallback:
        cell.append(" (kept own)", style="yellow")
    return cell


def render_tally(tally: RoundTallied, shown: list[tuple[str, float]], unvoted: int = 0) -> Table:
    """One bar per label `shown`, as long as its summed confidence, named by its author (the
    user may see who wrote what; only the members may not); the winner's in bold green. The
    `unvoted` labels left out are counted on a line of their own."""
    grid = Table.grid(padding=(0, 1), pad_edge=True)
    top = max(tally.scores.values(), default=0) or 1
    for label, score in shown:
        won = label == tally.winner_label
        style = "bold green" if won else "cyan"
        bar = "█" * max(round(score / top * BAR_WIDTH), 1 if score > 0 else 0)
        grid.add_row(
            Text.assemble((label, "bold"), (f" {tally.authors[label]}" if label in tally.authors else "", "dim")),
            Text(bar.ljust(BAR_WIDTH), style=style),
            Text(fmt.number(score), style=style, justify="right"),
            Text(f"winner: {tally.winner}" if won and tally.winner else "", style=style),
        )
    if unvoted:
        grid.add_row(Text(f"+ {unvoted} with no votes", style="dim"))
    if tally.winner_label is None:
        grid.add_row(Text("no winner this round", style="yellow"))
    return grid


def warning_line(warning: WarningRaised | Stored) -> Text:
    return Text.assemble(" ⚠ ", (f"{warning.member}: " if warning.member else ""), warning.message, style="yellow")
