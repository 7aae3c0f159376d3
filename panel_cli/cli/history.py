"""`panel history`: the runs kept in the transcript store.

These commands only read SQLite, so they import nothing that talks to a model and
start instantly. Errors are raised as `UserError` for the top-level handler to print.
"""

from __future__ import annotations

import json
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from pydantic import BaseModel
from rich.console import Console
from rich.table import Table
from rich.text import Text

from panel_cli.cli import completion
from panel_cli.store.db import (
    CallRecord,
    DecisionRecord,
    RetallyRecord,
    RunMember,
    RunRecord,
    RunStatus,
    RunSummary,
    TranscriptReader,
    record_retally,
)
from panel_cli.view import fmt

if TYPE_CHECKING:
    from panel_cli.protocols.tally import Tally

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


@history_app.command("decisions")
def list_decisions(
    topic: Annotated[str | None, typer.Option("--topic", help="Only decisions whose topic (question) holds this text, in any case.")] = None,
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
        str, typer.Argument(metavar="ID", help="A vote or decide run's id, or any unique beginning of one.", autocompletion=completion.run_ids)
    ],
    method: Annotated[
        str | None, typer.Option("--method", help="majority, supermajority, unanimous, ranked_choice or weighted (default: the run's).")
    ] = None,
    threshold: Annotated[float | None, typer.Option("--threshold", help="supermajority: the share to exceed (default: the run's).")] = None,
    quorum: Annotated[int | None, typer.Option("--quorum", min=1, help="Fewest ballots for a winner (default: the run's).")] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Count a stored vote or decision again from its stored ballots, with no model call, and keep the re-tally."""
    import time
    import uuid

    from panel_cli.cli.vote import parse_method
    from panel_cli.errors import UserError
    from panel_cli.protocols.tally import retally, stored_vote

    chosen = parse_method(method) if method is not None else None
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
    recount = retally(vote, method=chosen, threshold=threshold, quorum=quorum)
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
            id=retally_id, run_id=run.id, method=recount.tally.method, threshold=recount.tally.threshold,
            quorum=recount.tally.quorum, winner=recount.winner, leader_override=recount.leader_override,
            result=payload, created_at=time.time(),
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
    keys = ("winner", "method", "threshold", "quorum", "quorum_met", "vote_counts", "weights", "total_votes", "ballots_cast",
            "leader_override", "failure_reason")
    return {key: result.get(key) for key in keys}


def _print_retally(run: RunRecord, stored: dict[str, Any] | None, recount: dict[str, Any], counted: Tally, retally_id: str) -> None:
    """The stored outcome and the recount side by side, then the runoff's rounds if any."""
    from panel_cli.view.vote import render_rounds

    console = _console()
    console.print(Text.assemble(("Re-tally of run ", "bold"), (run.id, "bold"), f" ({run.protocol}): ", fmt.one_line(run.question, 100)))
    if stored is None:
        console.print(Text(f"The run did not finish ({run.status}); there is no stored outcome to compare with.", style="yellow"))
    table = Table(header_style="bold")
    for header in ("", "stored", "re-tally"):
        table.add_column(header)
    rows: list[tuple[str, Any]] = [
        ("method", lambda o: str(o.get("method")) + (f" (more than {o['threshold']:g})" if o.get("threshold") is not None else "")),
        ("quorum", lambda o: f"{o.get('quorum')}, {'met' if o.get('quorum_met') else 'not met'}"),
        *((option, lambda o, option=option: _option_cell(o, option)) for option in counted.options),
        ("votes", lambda o: f"{o.get('total_votes')} of {o.get('ballots_cast')} ballots"),
        ("winner", lambda o: f"{o['winner']}{' (the leader chose)' if o.get('leader_override') else ''}" if o.get("winner") else "none"),
    ]
    if (stored or {}).get("failure_reason") or recount.get("reason"):
        rows.append(("why none", lambda o: o.get("failure_reason") or o.get("reason") or ""))
    for name, show in rows:
        table.add_row(Text(name), Text(show(stored)) if stored is not None else Text("—", style="dim"), Text(show(recount)))
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
    return f"{count} (weight {weight:g})" if outcome.get("method") == "weighted" and weight is not None else str(count)


def _print_json(data: Any) -> None:
    """Plain `print`, not Rich: JSON on stdout must not be wrapped or coloured."""
    print(json.dumps(data, indent=2, ensure_ascii=False))
