"""The stage in progress as the live area draws it: what fits the terminal, each row laid out
once per change.

Live redraws about 8 times a second while a stage runs, and at 64 members every row changes
between two frames (64 answers being written). Laying the whole table out through Rich each
time took tens of milliseconds a frame, most of the CPU panel spent above its calls. So the
live area draws a stage's table itself: the title and header through Rich (once per layout),
each row's line from its cells, kept until the row changes, and only the rows that fit the
terminal, the others summed up in one line (`+ 37 more: 5 waiting, 30 answered, 2 failed`).
A row's line is the line Rich's table draws for it (tests/view/test_frame.py holds them
equal); the full table still prints once when the stage ends, every row in it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from rich.console import Console, ConsoleOptions, Group, RenderableType
from rich.segment import Segment
from rich.style import Style
from rich.text import Text

from panel_cli.view.tables import (
    CELL_PADDING,
    LATENCY_HEADER,
    STATUS_STYLES,
    CallRow,
    Column,
    Preview,
    StageState,
    StageTable,
    fit_columns,
    laid_table,
)

if TYPE_CHECKING:
    from panel_cli.view.tables import Status

# The lines a table takes above its rows: its title, its header and the rule under it.
TABLE_HEAD = 3
PLAIN = Style()
NEW_LINE = Segment.line()


class Frame:
    """The stage in progress as last drawn, drawn again as it was until an event changes it
    (`changed`): Live redraws on every tick, for the spinner, whether or not a row moved."""

    def __init__(self) -> None:
        self._version = 0
        self._drawn: tuple[tuple[int, int, int, int | None, int | None], list[Segment]] | None = None
        self._rows: dict[int, RowLines] = {}  # by stage: the one drawn, and the one before it

    def changed(self) -> None:
        self._version += 1

    def render(self, stage: StageState, console: Console, options: ConsoleOptions) -> list[Segment]:
        """The stage at the width and in the `options.height` lines it is given (the whole
        stage when no height is set)."""
        # A running call's time changes once a second, whatever the events.
        running = any(row.started is not None and row.pending for row in stage.rows)
        key = (id(stage), self._version, options.max_width, options.height, int(stage.clock()) if running else None)
        if self._drawn is None or self._drawn[0] != key:
            self._drawn = (key, self._draw(stage, console, options))
        return self._drawn[1]

    def whole(self, stage: StageState) -> RenderableType:
        """The stage with every row, as it prints once it ends: its rows' lines are the ones
        its frames kept, so a stage of 64 rows is not laid out through Rich once more."""
        return _Whole(self, stage)

    def _draw(self, stage: StageState, console: Console, options: ConsoleOptions) -> list[Segment]:
        room, options = options.height, options.update(height=None)  # what it draws takes the lines it needs
        if not windowed(stage):
            return list(console.render(stage.render(), options))
        below = stage.render_below()
        below_lines = console.render_lines(Group(*below), options, pad=False) if below else []
        if room is not None:
            room = max(room - TABLE_HEAD - len(below_lines), 1)
        segments = self._lines_of(stage).table(stage, console, options.max_width, room)
        for line in below_lines:
            segments += [*line, NEW_LINE]
        return segments

    def _lines_of(self, stage: StageState) -> RowLines:
        lines = self._rows.get(id(stage))
        if lines is None:
            lines = RowLines()
            self._rows = {**dict(list(self._rows.items())[-1:]), id(stage): lines}
        return lines


class _Whole:
    def __init__(self, frame: Frame, stage: StageState) -> None:
        self.frame = frame
        self.stage = stage

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> list[Segment]:
        return self.frame._draw(self.stage, console, options.update(height=None))


def windowed(stage: StageState) -> bool:
    """Whether the live area draws this stage row by row: a stage drawn as a plain stage table
    (StageTable and what goes under it), one line a row (no tools column, whose cells hold a
    line per tool call). Another stage's own table is drawn whole through Rich."""
    return type(stage).render is StageState.render and not stage.uses_tools


class RowLines:
    """Each row's cells and line as last laid out, kept while what the row shows and the
    column widths stay the same, and when each row last changed (in frames drawn)."""

    def __init__(self) -> None:
        self._cells: dict[int, tuple[tuple[object, ...], str, list[Column]]] = {}
        self._lines: dict[int, tuple[object, list[Segment]]] = {}
        self._texts: dict[int, tuple[object, list[Segment]]] = {}
        self._head: tuple[object, list[Segment]] | None = None
        self._changed: dict[int, int] = {}
        self._drawn = 0

    def table(self, stage: StageState, console: Console, width: int, room: int | None) -> list[Segment]:
        """The table's title and header, then its rows that fit in `room` lines, in table
        order, and a line for the rest."""
        self._drawn += 1
        rows = list(stage.rows)  # as they are now: Live draws on a thread of its own while events come
        table = StageTable(stage)
        starred = {id(row) for row in stage.winner_rows()}
        now = stage.clock()
        cells = [self._row_cells(table, row, id(row) in starred, now) for row in rows]
        columns = (
            [replace(column, cells=[row[place].cells[0] for row in cells]) for place, column in enumerate(cells[0])]
            if cells
            else table.columns()
        )
        fitted = fit_columns(columns, width)
        places = {id(column): place for place, column in enumerate(columns)}
        layout = tuple((places[id(column)], size) for column, size in fitted)
        segments = list(self._head_lines(stage, fitted, layout, console))
        shown, hidden = visible(rows, self._changed, room)
        for row in rows:
            if id(row) in shown:
                segments += self._line(table, row, layout, console)
        if hidden:
            segments += [Segment(" " + more_line(hidden), console.get_style("dim")), NEW_LINE]
        return segments

    def _head_lines(
        self, stage: StageState, fitted: list[tuple[Column, int]], layout: object, console: Console
    ) -> list[Segment]:
        key = (stage.title, layout)
        if self._head is None or self._head[0] != key:
            head = laid_table(stage.title, fitted, 0)
            width = sum(size + CELL_PADDING for _, size in fitted) + len(fitted) - 1
            lines = console.render_lines(head, console.options.update_width(width), pad=False)
            self._head = (key, [segment for line in lines for segment in (*line, NEW_LINE)])
        return self._head[1]

    def _row_cells(self, table: StageTable, row: CallRow, starred: bool, now: float) -> list[Column]:
        """The row's cells, built again only when what the row shows has changed; when only a
        running call's time has (once a second), its time cell alone is made anew. The text
        cell is drawn from the row itself (`_line`), so a reply growing costs none of this."""
        shows, time_shown = row_shows(row, starred), row.time_shown(now)
        cached = self._cells.get(id(row))
        if cached is None or cached[0] != shows:
            cached = self._cells[id(row)] = (shows, time_shown, table.columns([row], starred=starred, now=now))
            self._changed[id(row)] = self._drawn
        elif cached[1] != time_shown:
            cells = [
                replace(column, cells=[row.time_cell(now)]) if column.header == LATENCY_HEADER else column
                for column in cached[2]
            ]
            cached = self._cells[id(row)] = (shows, time_shown, cells)
        return cached[2]

    def _line(
        self, table: StageTable, row: CallRow, layout: tuple[tuple[int, int], ...], console: Console
    ) -> list[Segment]:
        """The row's line: its cells at the columns' widths, one space between them. What goes
        before the text is kept while the row shows the same; the text, while it reads the same."""
        shows, time_shown, cells = self._cells[id(row)]
        *before, (text_place, text_width) = layout
        key = (shows, time_shown, layout)
        cached = self._lines.get(id(row))
        if cached is None or cached[0] != key:
            segments: list[Segment] = []
            for place, size in before:
                segments += cell_segments(cells[place].cells[0], cells[place], size, console)
                segments.append(Segment(" ", PLAIN))
            cached = self._lines[id(row)] = (key, merged(segments))
        if text_place != len(cells) - 1:  # the text column was given up: nothing of it to draw
            return [
                *cached[1],
                *cell_segments(cells[text_place].cells[0], cells[text_place], text_width, console),
                NEW_LINE,
            ]
        text_key = (key, row.preview)
        drawn = self._texts.get(id(row))
        if drawn is None or drawn[0] != text_key:
            text = cell_segments(table.text_cell(row), cells[text_place], text_width, console)
            drawn = self._texts[id(row)] = (text_key, merged([*cached[1], *text]) + [NEW_LINE])
        return drawn[1]


def row_shows(row: CallRow, starred: bool) -> tuple[object, ...]:
    """Everything of a row its line shows but the text so far (`preview`, which changes most
    often and is drawn on its own) and a running call's time (`CallRow.time_shown`): when this
    is unchanged, so are the row's other cells."""
    return (
        row.name,
        row.label,
        row.about,
        row.status,
        row.latency,
        row.tokens,
        row.truncated,
        id(row.vote),
        tuple(row.ranking or ()),
        starred,
    )


def visible(rows: list[CallRow], changed: dict[int, int], room: int | None) -> tuple[set[int], list[CallRow]]:
    """The rows drawn in `room` lines (their ids) and the rows left out. When all do not fit,
    one line goes to saying what the rest are, and the rows drawn are the ones being written,
    then those waiting, then those that changed last."""
    if room is None or len(rows) <= room:
        return {id(row) for row in rows}, []
    order = sorted(
        range(len(rows)),
        key=lambda index: (
            rows[index].status != "writing",
            rows[index].status != "waiting",
            -changed.get(id(rows[index]), 0),
            index,
        ),
    )
    shown = {id(rows[index]) for index in order[: max(room - 1, 0)]}
    return shown, [row for row in rows if id(row) not in shown]


def more_line(hidden: list[CallRow]) -> str:
    """`+ 37 more: 5 waiting, 30 answered, 2 failed`, the statuses in the order the table names them."""
    counts: dict[Status, int] = {}
    for row in hidden:
        counts[row.status] = counts.get(row.status, 0) + 1
    parts = [f"{counts[status]} {status}" for status in STATUS_STYLES if status in counts]
    return f"+ {len(hidden)} more: " + ", ".join(parts)


def merged(segments: list[Segment]) -> list[Segment]:
    """A line's segments, neighbours of one style joined, so Live has fewer to measure and write
    on each frame; an ellipsis stays a segment of its own, so that the text beside it is measured
    as plain ASCII (Rich counts any other character one by one)."""
    out: list[Segment] = []
    for segment in Segment.simplify(segments):
        text, style = segment.text, segment.style
        while "…" in text and text != "…":
            before, _, text = text.partition("…")
            out += [Segment(before, style), Segment("…", style)] if before else [Segment("…", style)]
        if text:
            out.append(Segment(text, style))
    return out


def cell_segments(cell: Text | Preview, column: Column, width: int, console: Console) -> list[Segment]:
    """A cell as Rich's table draws it: a space each side in the column's style, the text cut
    to `width` with an ellipsis and padded as the column justifies it."""
    style = console.get_style(column.style) if column.style else PLAIN
    pad = Segment(" " * (CELL_PADDING // 2), style)
    if isinstance(cell, Preview):
        simple = cell.plain_line(width)
        cell = (
            Text(simple, style=cell.text.style)
            if simple is not None
            else next(iter(cell.__rich_console__(console, console.options.update_width(width))))
        )
    assert isinstance(cell, Text)
    plain = cell.plain
    if not cell.spans and plain.replace("…", "").isascii():
        if len(plain) > width:
            plain = plain[: width - 1] + "…"
        plain = plain.rjust(width) if column.justify == "right" else plain.ljust(width)
        text_style = console.get_style(cell.style) if cell.style else None
        return [pad, Segment(plain, style + text_style if text_style else style), pad]
    line = cell.copy()
    line.end = ""
    line.truncate(width, overflow="ellipsis")
    room = width - line.cell_len
    if column.justify == "right":
        line = Text(" " * room).append_text(line)
    else:
        line.pad_right(room)
    return [pad, *Segment.apply_style(line.render(console), style), pad]
