"""`panel history`: the runs kept in the transcript store.

These commands only read SQLite, so they import nothing that talks to a model and
start instantly. Errors are raised as `UserError` for the top-level handler to print.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table
from rich.text import Text

from panel_cli.store.db import CallRecord, RunRecord, RunStatus, TranscriptReader
from panel_cli.view import fmt

history_app = typer.Typer(help="List and inspect the runs kept in the transcript store.", no_args_is_help=True)

DbOption = Annotated[
    Path | None,
    typer.Option("--db", help="Transcript database to read (default: $PANEL_DB, else the user data folder)."),
]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of a table.")]

QUESTION_PREVIEW = 60
STATUS_STYLES = {
    "running": "yellow",
    "finished": "green",
    "no_answer": "yellow",
    "failed": "red",
    "interrupted": "magenta",
}


@history_app.command("list")
def list_runs(
    limit: Annotated[int, typer.Option("--limit", "-n", min=1, help="How many runs to show, newest first.")] = 20,
    status: Annotated[RunStatus | None, typer.Option("--status", help="Only runs with this status.")] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """List the most recent runs."""
    with TranscriptReader.open(db) as reader:
        runs = reader.list_runs(limit, status=status)
        if as_json:
            _print_json([run.model_dump(mode="json") for run in runs])
            return
        if not runs:
            _console().print(f"No runs yet in {reader.path}.")
            return
        # Only the question may shrink on a narrow terminal: Rich narrows wrappable columns
        # first, and its Text is cut with an ellipsis instead of wrapped.
        table = Table(box=None, pad_edge=False, collapse_padding=True, header_style="bold")
        for name in ("id", "started", "protocol", "panel", "status"):
            table.add_column(name, no_wrap=True)
        for name in ("calls", "tokens", "cost"):
            table.add_column(name, justify="right", no_wrap=True)
        table.add_column("question")
        for run in runs:
            table.add_row(
                reader.short_id(run.id),
                _time(run.started_at, seconds=False),
                run.protocol,
                run.panel,
                _status(run.status),
                str(run.calls),
                fmt.tokens(run.tokens),
                fmt.cost(run.cost),
                Text(fmt.one_line(run.question, QUESTION_PREVIEW), no_wrap=True, overflow="ellipsis"),
            )
    _console().print(table)


@history_app.command("show")
def show_run(
    run_id: Annotated[str, typer.Argument(metavar="ID", help="A run id, or any unique beginning of one.")],
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Show one run: its question, outcome, final answer and every model call."""
    with TranscriptReader.open(db) as reader:
        run = reader.get_run(run_id)
        calls = reader.run_calls(run.id)
        events = reader.run_events(run.id) if as_json else []
    if as_json:
        _print_json(
            {**run.model_dump(mode="json"), "calls": [call.model_dump(mode="json") for call in calls], "events": events}
        )
        return
    console = _console()
    console.print(_header(run))
    console.print()
    if run.final_answer:
        # Imported here: the Markdown parser would slow down every other history command.
        from rich.markdown import Markdown

        console.rule("Final answer")
        console.print(Markdown(run.final_answer))
        console.print()
    if calls:
        console.print(_calls_table(calls))


def _header(run: RunRecord) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column()
    grid.add_row("Run", run.id)
    grid.add_row("Question", run.question)
    grid.add_row("Status", _status(run.status))
    if run.error:
        grid.add_row("Error", run.error)
    grid.add_row("Protocol", f"{run.protocol} · panel {run.panel}")
    if run.members:
        grid.add_row("Members", ", ".join(f"{member.name} ({member.model})" for member in run.members))
    grid.add_row("Started", _time(run.started_at))
    if run.finished_at is not None:
        grid.add_row("Ended", f"{_time(run.finished_at)} ({run.finished_at - run.started_at:.1f}s)")
    grid.add_row("Totals", f"{run.calls} calls · {fmt.tokens(run.tokens)} tokens · {fmt.cost(run.cost)}")
    return grid


def _calls_table(calls: list[CallRecord]) -> Table:
    table = Table(title="Calls", header_style="bold")
    table.add_column("member")
    table.add_column("stage")
    table.add_column("round", justify="right")
    table.add_column("latency", justify="right")
    table.add_column("tokens", justify="right")
    table.add_column("cost", justify="right")
    table.add_column("error")
    for call in calls:
        known = [count for count in (call.tokens_in, call.tokens_out) if count is not None]
        table.add_row(
            call.member,
            call.stage,
            fmt.UNKNOWN if call.round is None else str(call.round),
            fmt.UNKNOWN if call.latency is None else f"{call.latency:.1f}s",
            fmt.tokens(sum(known) if known else None),
            fmt.cost(call.cost),
            Text.assemble((call.error_kind, "red"), f": {call.error}") if call.error_kind else "",
        )
    return table


def _time(timestamp: float, seconds: bool = True) -> str:
    """Local time, which is what a person remembers a run by."""
    return datetime.fromtimestamp(timestamp).strftime("%Y-%m-%d %H:%M:%S" if seconds else "%Y-%m-%d %H:%M")


def _status(status: str) -> Text:
    return Text(status, style=STATUS_STYLES.get(status, ""))


def _console() -> Console:
    """Markup off: questions, answers and provider errors are data, and a `[bold]` in
    one of them must print as written. Styles are applied with `Text` instead."""
    return Console(markup=False)


def _print_json(data: Any) -> None:
    """Plain `print`, not Rich: JSON on stdout must not be wrapped or coloured."""
    print(json.dumps(data, indent=2, ensure_ascii=False))
