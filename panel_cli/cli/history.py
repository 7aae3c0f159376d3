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
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table
from rich.text import Text

from panel_cli.cli import completion
from panel_cli.store.db import CallRecord, RunMember, RunRecord, RunStatus, RunSummary, TranscriptReader
from panel_cli.view import fmt

history_app = typer.Typer(help="List and inspect the runs kept in the transcript store.", no_args_is_help=True)

DB_HELP = "Transcript database (default: $PANEL_DB, else panel.db in the user data folder)."
DbOption = Annotated[Path | None, typer.Option("--db", help=DB_HELP, dir_okay=False)]
JsonOption = Annotated[bool, typer.Option("--json", help="Print JSON on stdout instead of a table.")]

QUESTION_PREVIEW = 60
STATUS_STYLES = {
    "running": "yellow",
    "finished": "green",
    "no_answer": "yellow",
    "failed": "red",
    "interrupted": "magenta",
}


class RunRow(BaseModel):
    """A run in `history list --json`, under the names every protocol's `--json` result uses."""

    run_id: str
    protocol: str
    question: str
    reached_answer: bool
    duration_s: float | None
    calls: int
    tokens: int | None
    cost: float | None
    panel: str
    status: RunStatus
    started_at: float
    finished_at: float | None

    @classmethod
    def of(cls, run: RunSummary) -> RunRow:
        return cls(**_envelope(run), panel=run.panel, status=run.status, started_at=run.started_at, finished_at=run.finished_at)


class RunDetail(BaseModel):
    """`history show --json`: the result envelope every protocol's `--json` shares first (so a
    script reads a stored run as it reads a live one), then what the store kept. `calls` is
    the count, as in the envelope; the calls themselves are `call_records`."""

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
    panel: str
    status: RunStatus
    started_at: float
    finished_at: float | None
    members: list[RunMember]
    config: dict[str, Any]
    result: dict[str, Any] | None
    error: str | None
    call_records: list[CallRecord]
    events: list[dict[str, Any]]


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
            _print_json([RunRow.of(run).model_dump(mode="json") for run in runs])
            return
        if not runs:
            _console().print(Text(_nothing_found(reader, status)), soft_wrap=True)  # a long path stays whole
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
                Text(reader.short_id(run.id)),
                _time(run.started_at, seconds=False),
                Text(run.protocol),
                Text(run.panel),
                _status(run.status),
                str(run.calls),
                fmt.tokens(run.tokens),
                fmt.cost(run.cost),
                Text(fmt.one_line(run.question, QUESTION_PREVIEW), no_wrap=True, overflow="ellipsis"),
            )
    _console().print(table)


def _nothing_found(reader: TranscriptReader, status: RunStatus | None) -> str:
    """An empty filter must not read as an empty store."""
    total = reader.count_runs() if status else 0
    if not total:
        return f"No runs yet in {reader.path}."
    return f"No {status} runs in {reader.path} ({total} run{'' if total == 1 else 's'} in all)."


@history_app.command("show")
def show_run(
    run_id: Annotated[
        str, typer.Argument(metavar="ID", help="A run id, or any unique beginning of one.", autocompletion=completion.run_ids)
    ],
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Show one run: its question, outcome, final answer and every model call."""
    with TranscriptReader.open(db) as reader:
        run = reader.get_run(run_id)
        calls = reader.run_calls(run.id)
        events = reader.run_events(run.id) if as_json else []
    if as_json:
        detail = RunDetail(
            **_envelope(run),
            final_answer=run.final_answer,
            warnings=run.warnings,
            panel=run.panel,
            status=run.status,
            started_at=run.started_at,
            finished_at=run.finished_at,
            members=run.members,
            config=run.config,
            result=run.result,
            error=run.error,
            call_records=calls,
            events=events,
        )
        _print_json(detail.model_dump(mode="json"))
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
    grid.add_row("Run", Text(run.id))
    grid.add_row("Question", Text(run.question))
    grid.add_row("Status", _status(run.status))
    if run.error:
        grid.add_row("Error", Text(run.error))
    grid.add_row("Protocol", Text(f"{run.protocol} · panel {run.panel}"))
    if run.members:
        grid.add_row("Members", Text(", ".join(f"{member.name} ({member.model})" for member in run.members)))
    grid.add_row("Started", _time(run.started_at))
    if run.finished_at is not None:
        grid.add_row("Ended", f"{_time(run.finished_at)} ({run.finished_at - run.started_at:.1f}s)")
    grid.add_row("Totals", f"{run.calls} calls · {fmt.tokens(run.tokens)} tokens · {fmt.cost(run.cost)}")
    return grid


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
            Text(call.member),
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


def _print_json(data: Any) -> None:
    """Plain `print`, not Rich: JSON on stdout must not be wrapped or coloured."""
    print(json.dumps(data, indent=2, ensure_ascii=False))
