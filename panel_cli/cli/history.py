"""`panel history`: the runs kept in the transcript store.

These commands only read SQLite (delete, purge and retally also write it), so they import
nothing that talks to a model and start instantly. `show` and `replay` import the event models
and the views inside themselves; `list`, `stats` and the rest never need them. Errors are
raised as `UserError` for the top-level handler to print.
"""

from __future__ import annotations

import json
import math
import re
import time
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer
from pydantic import BaseModel, ConfigDict
from rich.cells import cell_len
from rich.console import Console
from rich.table import Table
from rich.text import Text

from panel_cli.cli import completion
from panel_cli.errors import UserError
from panel_cli.exit_status import ExitStatus
from panel_cli.store.db import (
    THREAD_LIMIT,
    CallRecord,
    DecisionRecord,
    ListedStatus,
    RetallyRecord,
    RunMember,
    RunRecord,
    RunStatus,
    RunSummary,
    RunThread,
    TranscriptReader,
    record_retally,
)
from panel_cli.view import fmt
from panel_cli.wording import plural

if TYPE_CHECKING:
    from panel_cli.events import BaseEvent
    from panel_cli.protocols.vote.tally import Tally
    from panel_cli.store.stats import Usage

history_app = typer.Typer(help="List and inspect the runs kept in the transcript store.", no_args_is_help=True)

DB_HELP = "Transcript database (default: $PANEL_DB, else panel.db in the user data folder)."
DbOption = Annotated[Path | None, typer.Option("--db", help=DB_HELP, dir_okay=False)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of a table.")]
YesOption = Annotated[bool, typer.Option("--yes", "-y", help="Delete without asking first.")]
RunIdArgument = Annotated[
    str,
    typer.Argument(metavar="ID", help="A run id, or any unique beginning of one.", autocompletion=completion.run_ids),
]

# What `list --status` filters on: a run's status, or `stale` (running, but its process is
# gone). Spelled out because Typer takes one Literal, not `ListedStatus`'s union of two.
StatusFilter = Literal["running", "stale", "finished", "no_answer", "failed", "interrupted"]

QUESTION_PREVIEW = 60
THREAD_PREVIEW = 80
OUTCOME_PREVIEW = 40
MIN_CELL = 6
DEFAULT_SPEED = 10.0
STATUS_STYLES = {
    "running": "yellow",
    "stale": "red",
    "finished": "green",
    "no_answer": "yellow",
    "failed": "red",
    "interrupted": "magenta",
}
# `7d`, `24h`, `30m`: a span of time back from now, as `--since` and `--older-than` take it.
SPAN = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}


class RunRow(BaseModel):
    """A run in `history list --json`, under the names every protocol's `--json` result uses.
    `parent_id`: the run it follows up (`--continue`), null for none. Built when first used
    (`--json`): building it on import would cost every history command."""

    model_config = ConfigDict(defer_build=True)

    run_id: str
    protocol: str
    question: str
    reached_answer: bool
    duration_s: float | None
    calls: int
    tokens: int | None
    cost: float | None
    parent_id: str | None
    panel: str
    status: ListedStatus
    outcome: str | None
    started_at: float
    finished_at: float | None

    @classmethod
    def of(cls, run: RunSummary) -> RunRow:
        return cls(
            **_envelope(run),
            panel=run.panel,
            status=run.status,
            outcome=run.outcome,
            started_at=run.started_at,
            finished_at=run.finished_at,
        )


class RunDetail(BaseModel):
    """`history show --json`: the result envelope every protocol's `--json` shares first (so a
    script reads a stored run as it reads a live one), then what the store kept. `calls` is
    the count, as in the envelope; the calls themselves are `call_records`. `thread`: the
    runs it follows up, oldest first, and its follow-ups (`--continue`)."""

    model_config = ConfigDict(defer_build=True)

    run_id: str
    protocol: str
    question: str
    final_answer: str | None
    reached_answer: bool
    duration_s: float | None
    calls: int
    tokens: int | None
    cost: float | None
    warnings: list[Any]
    parent_id: str | None
    panel: str
    status: ListedStatus
    outcome: str | None = None
    started_at: float
    finished_at: float | None
    members: list[RunMember]
    config: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None
    thread: RunThread
    call_records: list[CallRecord]
    events: list[dict[str, Any]]

    @classmethod
    def of(cls, run: RunRecord, calls: list[CallRecord], events: list[dict[str, Any]]) -> RunDetail:
        """One stored run, as `show --json` and `export --format json` both print it."""
        return cls(
            **_envelope(run),
            final_answer=run.final_answer,
            warnings=run.warnings,
            panel=run.panel,
            status=run.status,
            outcome=run.outcome,
            started_at=run.started_at,
            finished_at=run.finished_at,
            members=run.members,
            config=run.config,
            result=run.result,
            error=run.error,
            thread=run.thread,
            call_records=calls,
            events=events,
        )


def _envelope(run: RunSummary) -> dict[str, Any]:
    return {
        "run_id": run.id,
        "protocol": run.protocol,
        "question": run.question,
        "reached_answer": run.reached_answer,
        "duration_s": run.duration_s,
        "calls": run.calls,
        "tokens": run.tokens,
        "cost": run.cost,
        "parent_id": run.parent_id,
    }


def moment(text: str, option: str) -> float:
    """When `text` points to, in epoch seconds: a span back from now (`7d`, `24h`, `30m`, `90s`,
    `2w`) or a date (`2025-01-31`, `2025-01-31T09:30`), in local time unless it names its zone.
    Either must be a time the calendar can name (`100000w` is not)."""
    cleaned = text.strip()
    try:
        if found := SPAN.fullmatch(cleaned.lower()):
            back = time.time() - float(found[1]) * UNIT_SECONDS[found[2]]
            return datetime.fromtimestamp(back).timestamp()
        return datetime.fromisoformat(cleaned).timestamp()
    except (ValueError, OverflowError, OSError):
        raise UserError(
            f"{option} takes a span such as 7d, 24h or 30m, or a date such as 2025-01-31, not '{text}'."
        ) from None


@history_app.command("list")
def list_runs(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many runs to show, newest first.")] = 20,
    status: Annotated[
        StatusFilter | None,
        typer.Option("--status", help="Only runs with this status (stale: running, but its process is gone)."),
    ] = None,
    protocol: Annotated[
        str | None, typer.Option("--protocol", "-p", metavar="NAME", help="Only runs of this protocol.")
    ] = None,
    search: Annotated[
        str | None,
        typer.Option(
            "--search", "-s", metavar="TEXT", help="Only runs whose question or final answer holds every word."
        ),
    ] = None,
    since: Annotated[
        str | None,
        typer.Option("--since", metavar="WHEN", help="Only runs started since: 7d, 24h, 30m, or a date (2025-01-31)."),
    ] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """List the most recent runs: id, time, protocol, panel, question, status, outcome, calls, cost."""
    after = moment(since, "--since") if since is not None else None
    given = {"status": status, "protocol": protocol, "search": search, "since": after}
    # Only the filters given are passed, so the reader's defaults decide the rest.
    filters: dict[str, Any] = {name: value for name, value in given.items() if value is not None}
    with TranscriptReader.open(db) as reader:
        runs = reader.list_runs(limit, **filters)
        if as_json:
            _print_json([RunRow.of(run).model_dump(mode="json") for run in runs])
            return
        if not runs:
            _console().print(
                Text(_nothing_found(reader, status, protocol, search, after)), soft_wrap=True
            )  # a long path stays whole
            return
        rows = [
            [
                reader.short_id(run.id),
                _when(run.started_at),
                run.protocol,
                run.panel,
                fmt.one_line(run.question, QUESTION_PREVIEW),
                run.status,
                fmt.one_line(run.outcome or "", OUTCOME_PREVIEW),
                str(run.calls),
                fmt.cost(run.cost),
            ]
            for run in runs
        ]
    console = _console()
    console.print(_runs_table(rows, console.width))


def _runs_table(rows: list[list[str]], width: int) -> Table:
    """The runs, one per line. Every cell is a `Text` cut with an ellipsis rather than wrapped,
    so a run stays one line; the panel, question and outcome share what the other columns leave
    of the width, the question first (`_share`)."""
    headers = ["id", "started", "protocol", "panel", "question", "status", "outcome", "calls", "cost"]
    natural = [max(cell_len(header), *(cell_len(row[index]) for row in rows)) for index, header in enumerate(headers)]
    flexible = {headers.index(name): natural[headers.index(name)] for name in ("panel", "question", "outcome")}
    room = width - sum(size for index, size in enumerate(natural) if index not in flexible) - (len(headers) - 1)
    panel, question, outcome = _share(room, *flexible.values())
    sizes = dict(zip(flexible, (panel, question, outcome), strict=True))
    table = Table(box=None, pad_edge=False, collapse_padding=True, header_style="bold")
    for index, header in enumerate(headers):
        table.add_column(
            header, no_wrap=True, width=sizes.get(index), justify="right" if header in ("calls", "cost") else "left"
        )
    for row in rows:
        cells = [Text(cell, no_wrap=True, overflow="ellipsis") for cell in row]
        cells[headers.index("status")].stylize(STATUS_STYLES.get(row[headers.index("status")], ""))
        table.add_row(*cells)
    return table


def _share(room: int, panel: int, question: int, outcome: int) -> tuple[int, int, int]:
    """Widths for the panel, question and outcome columns in `room` characters: the panel up to
    a fifth and the outcome up to a quarter, the question the rest; what the question does not
    need goes back to the outcome, then the panel. None narrower than MIN_CELL."""
    panel_width = min(panel, max(MIN_CELL, room // 5))
    outcome_width = min(outcome, max(MIN_CELL, room // 4))
    question_width = max(MIN_CELL, room - panel_width - outcome_width)
    spare = max(0, question_width - question)
    question_width -= spare
    grown = min(outcome, outcome_width + spare)
    spare -= grown - outcome_width
    return min(panel, panel_width + spare), question_width, grown


def _nothing_found(
    reader: TranscriptReader, status: str | None, protocol: str | None, search: str | None, since: float | None
) -> str:
    """An empty filter must not read as an empty store: say what was asked for, and how many
    runs there are in all."""
    total = reader.count_runs()
    if not total:
        return f"No runs yet in {reader.path}."
    kind = " ".join(word for word in (status, protocol) if word)
    asked = f"No {kind} runs" if kind else "No runs"
    if search is not None:
        asked += f" matching '{search}'"
    if since is not None:
        asked += f" since {_time(since, seconds=False)}"
    return f"{asked} in {reader.path} ({plural(total, 'run')} in all)."


@history_app.command("show")
def show_run(
    run_id: RunIdArgument,
    plain: Annotated[
        bool, typer.Option("--plain", help="Each event as a plain line instead of the protocol's tables.")
    ] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Show one run: its header, every round as the protocol's own tables, the final answer and every call."""
    with TranscriptReader.open(db) as reader:
        run = reader.get_run(run_id)
        calls = reader.run_calls(run.id)
        payloads = reader.run_events(run.id)
        threaded = [run.id, *(line.run_id for line in (*run.thread.ancestors, *run.thread.follow_ups))]
        shorts = {thread_id: reader.short_id(thread_id) for thread_id in threaded}
    if as_json:
        _print_json(RunDetail.of(run, calls, payloads).model_dump(mode="json"))
        return
    # Imported here: the event models and the views would slow every other history command.
    from panel_cli.view.replay import draw, draw_plain, stored_events

    events = stored_events(payloads)
    console = _console()
    console.print(_header(run))
    console.print()
    if run.parent_id is not None or run.thread.follow_ups:
        console.print(_thread_table(run, shorts))
        console.print()
    if plain:
        draw_plain(console.file, events)
        _print_plain_answer(console, events)
    else:
        draw(console, events)
    if run.status in ("running", "stale"):
        console.print(Text(_unfinished(run), style=STATUS_STYLES[run.status]))
    if calls:
        console.print()
        console.print(_calls_table(calls))


def _thread_table(run: RunRecord, shorts: dict[str, str]) -> Table:
    """The run among its follow-ups, a line each: the runs it follows up, oldest first, then
    the run itself (marked), then its follow-ups indented under the run they follow up. Each
    line is the id, the question and the answer's first line, cut to the width."""
    ancestors = run.thread.ancestors
    ids = [f"  {shorts[line.run_id]}" for line in ancestors] + [f"▸ {shorts[run.id]}"]
    ids += [f"{'  ' * line.depth}↳ {shorts[line.run_id]}" for line in run.thread.follow_ups]
    table = Table(
        title="Thread",
        title_justify="left",
        title_style="bold",
        box=None,
        pad_edge=False,
        show_header=False,
        expand=True,
    )
    table.add_column(no_wrap=True, min_width=max(cell_len(cell) for cell in ids))
    table.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
    table.add_column(no_wrap=True, overflow="ellipsis", ratio=1)
    oldest_parent = ancestors[0].parent_id if ancestors else run.parent_id
    if oldest_parent is not None:
        gap = (
            "earlier runs not shown"
            if len(ancestors) >= THREAD_LIMIT
            else f"follows up {oldest_parent}, no longer stored"
        )
        table.add_row(Text("  …", style="dim"), Text(gap, style="dim"), Text(""))
    answer = fmt.one_line(run.final_answer, THREAD_PREVIEW) if run.final_answer is not None else None
    lines = [(line.question, line.answer_preview, line.status, "") for line in ancestors]
    lines.append((run.question, answer, run.status, "bold"))
    lines += [(line.question, line.answer_preview, line.status, "") for line in run.thread.follow_ups]
    for cell, (question, preview, status, style) in zip(ids, lines, strict=True):
        question_cell = Text(fmt.one_line(question, THREAD_PREVIEW), style=style, no_wrap=True, overflow="ellipsis")
        table.add_row(Text(cell, style=style), question_cell, _thread_answer(preview, status))
    return table


def _thread_answer(answer: str | None, status: str) -> Text:
    """A run's answer on its thread line; a run with none shows its status instead."""
    if answer is None:
        return _status(status)
    return Text(f"→ {answer}", no_wrap=True, overflow="ellipsis")


def _unfinished(run: RunRecord) -> str:
    """What a run with no end is: still going, or never to end (its events stop where it died)."""
    if run.status == "stale":
        return "The run never ended: its process is gone (it crashed or was killed); `panel resume` can continue it."
    return "The run is still going; this is how far it has come."


def _header(run: RunRecord) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    grid.add_row("Run", Text(run.id))
    grid.add_row("Question", Text(run.question))
    grid.add_row("Status", _status_detail(run))
    if run.error:
        grid.add_row("Error", Text(run.error))
    grid.add_row("Protocol", Text(f"{run.protocol} · panel {run.panel}"))
    if run.members:
        members = ", ".join(
            f"{member.label} " * bool(member.label) + f"{member.name} ({member.model})" for member in run.members
        )
        grid.add_row("Members", Text(members))
    grid.add_row("Started", _time(run.started_at))
    if run.finished_at is not None:
        grid.add_row("Ended", f"{_time(run.finished_at)} ({run.finished_at - run.started_at:.1f}s)")
    cost = fmt.run_cost(run.cost, (member.model for member in run.members))
    grid.add_row("Totals", f"{plural(run.calls, 'call')} · {fmt.tokens(run.tokens)} tokens · {cost}")
    return grid


def _status_detail(run: RunRecord) -> Text:
    """`stale` says whose process is gone, so a person can check that it really is."""
    status = _status(run.status)
    if run.status == "stale" and run.pid is not None:
        status.append(f" (running, but its process {run.pid}" + (f" on {run.host}" if run.host else "") + " is gone)")
    return status


def _print_plain_answer(console: Console, events: list[BaseEvent]) -> None:
    """The plain view leaves the answer to its caller, as a run off a terminal prints it on
    stdout after the progress lines."""
    from panel_cli.events import RunFinished

    finished = next((event for event in reversed(events) if isinstance(event, RunFinished)), None)
    if finished is not None and finished.final_answer is not None:
        console.print()
        console.print(Text(finished.final_answer.rstrip()), soft_wrap=True)  # as written, not wrapped


@history_app.command("replay")
def replay_run(
    run_id: RunIdArgument,
    speed: Annotated[
        str,
        typer.Option(
            "--speed",
            metavar="X",
            help="How many times faster than the run went: 1 is real time, 0 or max waits for nothing.",
        ),
    ] = f"{DEFAULT_SPEED:g}",
    plain: Annotated[bool, typer.Option("--plain", help="Plain lines, as a run off a terminal prints them.")] = False,
    db: DbOption = None,
) -> None:
    """Play a stored run again in the live view at its own pace, sped up; no model is called."""
    factor = _speed(speed)
    with TranscriptReader.open(db) as reader:
        run = reader.get_run(run_id)
        payloads = reader.run_events(run.id)
    if not payloads:
        raise UserError(f"Run {run.id} has no stored events to replay.")
    import asyncio
    import signal

    from panel_cli.cli.signals import Interrupted, on_sigterm_exit
    from panel_cli.view.base import View
    from panel_cli.view.live import LiveView
    from panel_cli.view.plain import PlainView
    from panel_cli.view.replay import play, stored_events

    on_sigterm_exit()
    events = stored_events(payloads)
    console = _console()
    plain = plain or not console.is_terminal
    pace = "no waiting" if factor is None else ("real time" if factor == 1 else f"{factor:g}× speed")
    console.print(
        Text(f"Replay of run {run.id} from {_time(run.started_at)}, {pace}; no model is called.", style="dim"),
        soft_wrap=True,
    )
    view: View = PlainView(console.file) if plain else LiveView(console)
    try:
        asyncio.run(play(view, events, speed=factor))
    except KeyboardInterrupt:
        raise Interrupted(signal.SIGINT) from None  # Typer would exit 130 without a word
    if plain:
        _print_plain_answer(console, events)


def _speed(text: str) -> float | None:
    """`10`, `1`, `0.5`; `0` and `max` mean no waiting (None)."""
    if text.strip().lower() == "max":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isnan(value) or value < 0:
        raise UserError(
            f"--speed takes a number of times faster than the run (10, 1, 0.5), or 0 or max for no waiting, not '{text}'."
        )
    return None if value == 0 or math.isinf(value) else value


@history_app.command("delete")
def delete_run(run_id: RunIdArgument, yes: YesOption = False, db: DbOption = None) -> None:
    """Delete one run: its events, calls and texts no other run shares. Asks first unless --yes."""
    from panel_cli.store.db import delete_run as delete_stored_run
    from panel_cli.store.processes import this_host

    with TranscriptReader.open(db) as reader:
        run = reader.get_run(run_id)
        path = reader.path
    if run.status == "running" and run.host == this_host():
        raise UserError(f"Run {run.id} is still running (process {run.pid}); stop it, or wait for it to end.")
    described = f"run {run.id} ({run.protocol}, {run.status}, {_time(run.started_at, seconds=False)})"
    if not yes:
        typer.echo(f"{described[0].upper()}{described[1:]}: {fmt.one_line(run.question, QUESTION_PREVIEW)}", err=True)
        _confirm("Delete it?")
    delete_stored_run(path, run.id)
    _console().print(Text(f"Deleted {described}."), soft_wrap=True)


@history_app.command("purge")
def purge_runs(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than", metavar="WHEN", help="Delete runs started before this: 30d, 12h, or a date (2025-01-31)."
        ),
    ],
    status: Annotated[RunStatus | None, typer.Option("--status", help="Only runs with this status.")] = None,
    yes: YesOption = False,
    db: DbOption = None,
) -> None:
    """Delete the runs started before a time (of one status, if given); says how many, and asks first."""
    from panel_cli.store.db import purge_runs as purge_stored_runs

    cutoff = moment(older_than, "--older-than")
    with TranscriptReader.open(db) as reader:
        doomed = _runs_before(reader, cutoff, status)
        path = reader.path
    kind = f"{status} " if status else ""
    before = _time(cutoff, seconds=False)
    if not doomed:
        _console().print(Text(f"No {kind}runs started before {before} in {path}; nothing to delete."), soft_wrap=True)
        return
    if not yes:
        _confirm(f"Delete {plural(len(doomed), f'{kind}run')} started before {before} from {path}?")
    deleted = purge_stored_runs(path, older_than=cutoff, status=status)
    _console().print(Text(f"Deleted {plural(len(deleted), f'{kind}run')} started before {before}."), soft_wrap=True)


@history_app.command("import")
def import_runs(
    other: Annotated[
        Path,
        typer.Argument(
            metavar="OTHER.db", help="The transcript database to copy runs from (only read).", dir_okay=False
        ),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print what was imported and skipped as JSON on stdout.")
    ] = False,
    db: DbOption = None,
) -> None:
    """Copy into this database every run of another it lacks (a batch shard's, say): ids kept, runs already here skipped."""
    from panel_cli.store.merge import import_runs as import_stored_runs

    report = import_stored_runs(db, other)
    if as_json:
        _print_json(report.model_dump(mode="json"))
        return
    parts = [f"Imported {plural(len(report.imported), 'run')} from {report.source} into {report.target}"]
    if report.skipped:
        parts.append(f"skipped {plural(len(report.skipped), 'run')} already there")
    if report.running:
        parts.append(
            f"left {plural(len(report.running), 'run')} still running on this host (import again once it ends)"
        )
    _console().print(Text("; ".join(parts) + "."), soft_wrap=True)


def _runs_before(reader: TranscriptReader, cutoff: float, status: RunStatus | None) -> list[RunSummary]:
    """The runs a purge would delete, to count them before asking: started before `cutoff`,
    with `status` if given, and none whose process is still writing it (a stored `running`
    run is purged only when it is stale)."""
    listed: ListedStatus | None = "stale" if status == "running" else status
    filters = {"status": listed} if listed else {}
    return [run for run in reader.list_runs(-1, **filters) if run.started_at < cutoff and run.status != "running"]


def _confirm(question: str) -> None:
    """Ask on stderr (stdout stays for what was done); anything but yes, or no answer at all
    (end of input), leaves everything as it is and exits 1."""
    try:
        agreed = typer.confirm(question, default=False, err=True)
    except typer.Abort:
        typer.echo(err=True)  # end the prompt's line
        agreed = False
    if not agreed:
        typer.echo("Nothing deleted.", err=True)
        raise typer.Exit(ExitStatus.FAILURE)


@history_app.command("stats")
def show_stats(as_json: JsonOption = False, db: DbOption = None) -> None:
    """Runs, calls, tokens and cost: in all, by model, by protocol and by month."""
    with TranscriptReader.open(db) as reader:
        report = reader.stats()
        path = reader.path
    if as_json:
        _print_json(report.model_dump(mode="json"))
        return
    console = _console()
    if not report.total.runs:
        console.print(Text(f"No runs yet in {path}."), soft_wrap=True)
        return
    total = report.total
    cost = fmt.run_cost(total.cost, (row.model for row in report.by_model))
    totals = (
        f"{plural(total.runs, 'run')} · {plural(total.calls, 'call')} · {fmt.tokens(total.tokens)} tokens · cost {cost}"
    )
    console.print(Text(f"{path}: {totals}"), soft_wrap=True)
    groups: list[tuple[str, list[tuple[str, Usage]]]] = [
        ("model", [(row.model, row) for row in report.by_model]),
        ("protocol", [(row.protocol, row) for row in report.by_protocol]),
        ("month", [(row.month, row) for row in report.by_month]),
    ]
    for name, rows in groups:
        console.print()
        console.print(_usage_table(name, rows))


def _usage_table(name: str, rows: list[tuple[str, Usage]]) -> Table:
    """One group of the stats. A demo persona's calls cost nothing, and say so rather than
    showing an unknown price."""
    table = Table(
        title=f"By {name}", title_justify="left", title_style="bold", header_style="bold", box=None, pad_edge=False
    )
    table.add_column(name)
    for header in ("runs", "calls", "tokens", "cost"):
        table.add_column(header, justify="right", no_wrap=True)
    for key, usage in rows:
        cost = fmt.run_cost(usage.cost, [key]) if name == "model" else fmt.cost(usage.cost)
        table.add_row(Text(key or fmt.UNKNOWN), f"{usage.runs:,}", f"{usage.calls:,}", fmt.tokens(usage.tokens), cost)
    return table


def _calls_table(calls: list[CallRecord]) -> Table:
    """One row per call. A failure shows its clean message; the provider's raw `detail` stays
    in the store (and `--json`) for whoever debugs it."""
    table = Table(title="Calls", header_style="bold")
    table.add_column("member")
    table.add_column("stage")
    table.add_column("round", justify="right")
    table.add_column("latency", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("cost", justify="right")
    table.add_column("note")
    for call in calls:
        known = [count for count in (call.tokens_in, call.tokens_out) if count is not None]
        table.add_row(
            Text(fmt.who(call.member, call.about)),
            Text(call.stage),
            fmt.UNKNOWN if call.round is None else str(call.round),
            fmt.UNKNOWN if call.latency is None else f"{call.latency:.1f}s",
            fmt.tokens(sum(known) if known else None),
            fmt.cost(call.cost),
            _note(call),
        )
    return table


def _note(call: CallRecord) -> Text:
    if call.error_kind:
        return Text.assemble((call.error_kind, "red"), f": {call.error or ''}")
    if call.truncated:
        return Text("reply truncated", style="yellow")
    return Text("")


def _when(timestamp: float) -> str:
    """A run's start as the list shows it: `11-30 14:54` this year, `2024-11-30` before."""
    moment = datetime.fromtimestamp(timestamp)
    return moment.strftime("%m-%d %H:%M" if moment.year == datetime.now().year else "%Y-%m-%d")


def _time(timestamp: float, seconds: bool = True) -> str:
    """Local time, which is what a person remembers a run by."""
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def _status(status: str) -> Text:
    return Text(status, style=STATUS_STYLES.get(status, ""))


def _console() -> Console:
    """Questions, answers, names and provider errors are data: a `[bold]`, a `[/INST]` or a
    `:smile:` in one of them must print as written, so markup, emoji codes and highlighting
    are off, and styles are applied with `Text`."""
    return Console(markup=False, emoji=False, highlight=False)


@history_app.command("decisions")
def list_decisions(
    topic: Annotated[
        str | None, typer.Option("--topic", help="Only decisions whose topic (question) holds this text, in any case.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many decisions to show, newest first.")] = 20,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """List the decisions `panel decide` made: topic, winner, counts, method, leader."""
    with TranscriptReader.open(db) as reader:
        decisions = reader.list_decisions(limit, topic=topic)
        if as_json:
            _print_json([decision.model_dump(mode="json") for decision in decisions])
            return
        if not decisions:
            where = f" about '{topic}'" if topic else ""
            _console().print(Text(f"No decisions{where} in {reader.path}."), soft_wrap=True)
            return
        table = Table(box=None, pad_edge=False, collapse_padding=True, header_style="bold")
        for name in ("id", "decided", "method", "winner", "votes", "leader"):
            table.add_column(name, no_wrap=True)
        table.add_column("topic")
        for decision in decisions:
            table.add_row(
                Text(reader.short_id(decision.run_id)),
                _time(decision.decided_at, seconds=False),
                Text(decision.method),
                Text(decision.winner or "none", style="" if decision.winner else "yellow"),
                Text(_decision_votes(decision)),
                Text(_decision_leader(decision)),
                Text(fmt.one_line(decision.topic, QUESTION_PREVIEW), no_wrap=True, overflow="ellipsis"),
            )
    _console().print(table)


def _decision_votes(decision: DecisionRecord) -> str:
    """`3 of 4` for the winner's votes; the counts when nothing won."""
    if decision.winner is not None and not decision.leader_override:
        return f"{decision.vote_counts.get(decision.winner, 0)} of {decision.total_votes}"
    return ", ".join(f"{option} {count}" for option, count in decision.vote_counts.items() if count) or "no votes"


def _decision_leader(decision: DecisionRecord) -> str:
    if decision.leader is None:
        return ""
    return f"{decision.leader} (chose)" if decision.leader_override else decision.leader


@history_app.command("retally")
def retally_run(
    run_id: Annotated[
        str,
        typer.Argument(
            metavar="ID",
            help="A vote or decide run's id, or any unique beginning of one.",
            autocompletion=completion.run_ids,
        ),
    ],
    method: Annotated[
        str | None,
        typer.Option(
            "--method",
            help="majority, supermajority, unanimous, ranked_choice, weighted, plurality or weighted_plurality "
            "(default: the run's).",
        ),
    ] = None,
    tie_break: Annotated[
        str | None,
        typer.Option(
            "--tie-break", help="plurality methods: none, leader or first settles a tie (default: the run's)."
        ),
    ] = None,
    threshold: Annotated[
        float | None, typer.Option("--threshold", help="supermajority: the share to exceed (default: the run's).")
    ] = None,
    quorum: Annotated[
        int | None, typer.Option("--quorum", min=1, help="Fewest ballots for a winner (default: the run's).")
    ] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Count a stored vote or decision again from its stored ballots, with no model call, and keep the re-tally."""
    import time
    import uuid

    from panel_cli.protocols.vote.tally import TIE_BREAKS, parse_choice, parse_method, retally, stored_vote

    chosen = parse_method(method) if method is not None else None
    settle = parse_choice(tie_break, TIE_BREAKS) if tie_break is not None else None
    if tie_break is not None and settle is None:
        raise UserError(f"--tie-break: '{tie_break}' is not a tie break; choose none, leader or first.")
    with TranscriptReader.open(db) as reader:
        run = reader.get_run(run_id)
        events = reader.run_events(run.id) if run.protocol in ("vote", "decide") else []
        path = reader.path
    if run.protocol not in ("vote", "decide"):
        raise UserError(f"Run {run.id} is a {run.protocol} run; only vote and decide runs have ballots to re-tally.")
    vote = stored_vote(events)
    if vote is None:
        raise UserError(f"Run {run.id} has no stored vote to re-tally: it ended before its vote opened.")
    if threshold is not None and (chosen or vote.method) != "supermajority":
        raise UserError(f"--threshold applies to --method supermajority, not {chosen or vote.method}.")
    recount = retally(vote, method=chosen, threshold=threshold, quorum=quorum, tie_break=settle)
    stored = _stored_outcome(run.result)
    retally_id = uuid.uuid4().hex[:12]
    payload = {
        "retally_id": retally_id,
        "run_id": run.id,
        "protocol": run.protocol,
        "question": run.question,
        "stored": stored,
        "retally": {
            "winner": recount.winner,
            "leader": recount.leader,
            "leader_override": recount.leader_override,
            "reason": recount.reason if recount.winner is None else None,
            **recount.tally.model_dump(mode="json", exclude={"winner", "reason"}),
            "tally_winner": recount.tally.winner,
        },
        "warnings": recount.warnings,
    }
    record_retally(
        path,
        RetallyRecord(
            id=retally_id,
            run_id=run.id,
            method=recount.tally.method,
            threshold=recount.tally.threshold,
            quorum=recount.tally.quorum,
            winner=recount.winner,
            leader_override=recount.leader_override,
            result=payload,
            created_at=time.time(),
        ),
    )
    if as_json:
        _print_json(payload)
        return
    errors = Console(stderr=True, markup=False, emoji=False, highlight=False)
    for warning in recount.warnings:
        errors.print(Text(f"warning: {warning}", style="yellow"))
    _print_retally(run, stored, payload["retally"], recount.tally, retally_id)


def _stored_outcome(result: dict[str, Any] | None) -> dict[str, Any] | None:
    """What the run itself concluded, from its stored result (None when it never finished)."""
    if not result:
        return None
    keys = (
        "winner",
        "method",
        "threshold",
        "tie_break",
        "quorum",
        "quorum_met",
        "vote_counts",
        "weights",
        "total_votes",
        "ballots_cast",
        "leader_override",
        "failure_reason",
    )
    return {key: result.get(key) for key in keys}


def _print_retally(
    run: RunRecord, stored: dict[str, Any] | None, recount: dict[str, Any], counted: Tally, retally_id: str
) -> None:
    """The stored outcome and the recount side by side, then the runoff's rounds if any."""
    from panel_cli.view.vote import render_rounds

    console = _console()
    console.print(
        Text.assemble(
            ("Re-tally of run ", "bold"), (run.id, "bold"), f" ({run.protocol}): ", fmt.one_line(run.question, 100)
        )
    )
    if stored is None:
        console.print(
            Text(f"The run did not finish ({run.status}); there is no stored outcome to compare with.", style="yellow")
        )
    table = Table(header_style="bold")
    for header in ("", "stored", "re-tally"):
        table.add_column(header)
    rows: list[tuple[str, Any]] = [
        (
            "method",
            lambda o: (
                str(o.get("method"))
                + (f" (more than {o['threshold']:g})" if o.get("threshold") is not None else "")
                + (f", tie_break {o['tie_break']}" if o.get("tie_break") else "")
            ),
        ),
        ("quorum", lambda o: f"{o.get('quorum')}, {'met' if o.get('quorum_met') else 'not met'}"),
        *((option, lambda o, option=option: _option_cell(o, option)) for option in counted.options),
        ("votes", lambda o: f"{o.get('total_votes')} of {o.get('ballots_cast')} ballots"),
        (
            "winner",
            lambda o: (
                f"{o['winner']}{' (the leader chose)' if o.get('leader_override') else ''}"
                if o.get("winner")
                else "none"
            ),
        ),
    ]
    if (stored or {}).get("failure_reason") or recount.get("reason"):
        rows.append(("why none", lambda o: o.get("failure_reason") or o.get("reason") or ""))
    for name, show in rows:
        table.add_row(
            Text(name), Text(show(stored)) if stored is not None else Text("—", style="dim"), Text(show(recount))
        )
    console.print(table)
    if counted.rounds:
        console.print(render_rounds(counted.rounds))
    console.print(Text(f"Recorded as re-tally {retally_id}; no model was called.", style="dim"))


def _option_cell(outcome: dict[str, Any], option: str) -> str:
    """An option's votes; with weighted voting, their weight too."""
    count = (outcome.get("vote_counts") or {}).get(option)
    if count is None:
        return "—"
    weight = (outcome.get("weights") or {}).get(option)
    weighted = outcome.get("method") in ("weighted", "weighted_plurality")
    return f"{count} (weight {weight:g})" if weighted and weight is not None else str(count)


def _print_json(data: Any) -> None:
    """Plain `print`, not Rich: JSON on stdout must not be wrapped or coloured."""
    print(json.dumps(data, indent=2, ensure_ascii=False))


from panel_cli.cli import history_export  # noqa: E402, F401  (registers `history export`; needs history_app above)
