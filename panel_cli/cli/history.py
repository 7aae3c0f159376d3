"""`panel history`: the runs kept in the transcript store.

Each command parses its options, asks the store, hands what it read to its view (view/history.py,
view/history_show.py, view/stats.py, view/retally.py, view/history_json.py) and exits. This
module holds only the commands' signatures: each command imports what it reads and draws with
inside itself, so `panel history list --help` costs what any Typer command's help costs, and
`list` loads neither pydantic nor the event models. Errors are raised as `UserError` for the
top-level handler to print.
"""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

import typer

from panel_cli.cli import completion
from panel_cli.cli.history_export import export_run
from panel_cli.cli.history_options import DbOption, JsonOption, RunIdArgument, YesOption
from panel_cli.errors import UserError
from panel_cli.exit_status import ExitStatus
from panel_cli.untrusted import clean_record, clean_strings

if TYPE_CHECKING:
    from panel_cli.store.reader import TranscriptReader
    from panel_cli.store.records import RunSummary

history_app = typer.Typer(help="List and inspect the runs kept in the transcript store.", no_args_is_help=True)

# What `list --status` filters on: a run's status, `stale` (running, but its process is gone)
# or `damaged` (its row cannot be read). Spelled out because Typer takes one Literal.
StatusFilter = Literal["running", "stale", "finished", "no_answer", "failed", "interrupted", "resumed", "damaged"]
RunStatusOption = Literal["running", "finished", "no_answer", "failed", "interrupted", "resumed"]

DEFAULT_SPEED = 10.0
# The slowest replay: a hundredth of the run's own pace (a slower one would wait for ever).
MIN_SPEED = 0.01
# The most runs or decisions a list shows, and the most ballots a re-tally may ask for.
MAX_LIMIT = 1_000_000
MAX_QUORUM = 10_000
# `7d`, `24h`, `30m`: a span of time back from now, as `--since` and `--older-than` take it.
SPAN = re.compile(r"(\d+(?:\.\d+)?)\s*([smhdw])")
UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
# A purge deletes for good: a span shorter than this is refused, as `1m` is one minute
# (not a month) and would delete nearly every run.
MIN_PURGE_SPAN = 3600


def moment(text: str, option: str, *, shortest: float = 0) -> float:
    """When `text` points to, in epoch seconds: a span back from now (`7d`, `24h`, `30m`, `90s`,
    `2w`) or a date (`2025-01-31`, `2025-01-31T09:30`), in local time unless it names its zone.
    Either must be a time the calendar can name (`100000w` is not); a span must be at least
    `shortest` seconds."""
    from datetime import datetime

    cleaned = text.strip()
    try:
        if found := SPAN.fullmatch(cleaned.lower()):
            span = float(found[1]) * UNIT_SECONDS[found[2]]
            if span < shortest:
                unit = {"s": "second", "m": "minute", "h": "hour", "d": "day", "w": "week"}[found[2]]
                said = f"{found[1]} {unit}{'' if found[1] == '1' else 's'}" + (
                    " (m is minutes)" if found[2] == "m" else ""
                )
                raise UserError(
                    f"{option} {text} is {said}: a span shorter than an hour would delete nearly every run,"
                    " so give one of an hour or more (90m, 12h, 30d) or a date (2025-01-31)."
                )
            return datetime.fromtimestamp(time.time() - span).timestamp()
        return datetime.fromisoformat(cleaned).timestamp()
    except (ValueError, OverflowError, OSError):
        raise UserError(
            f"{option} takes a span such as 7d, 24h or 30m, or a date such as 2025-01-31, not '{text}'."
        ) from None


def known_protocol(reader: TranscriptReader, name: str) -> None:
    """`--protocol` names a protocol panel knows, or one some stored run has (a plugin's
    since removed); anything else is a slip, refused with the names there are."""
    from panel_cli.protocols.registry import names, unknown_protocol

    if name not in names() and not reader.has_protocol(name):
        raise UserError(f"--protocol: {unknown_protocol(name)}.")


@history_app.command("list")
def list_runs(
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=MAX_LIMIT, help="How many runs to show, newest first.")
    ] = 20,
    status: Annotated[
        StatusFilter | None,
        typer.Option(
            "--status",
            help="Only runs with this status (stale: running, but its process is gone; damaged: unreadable).",
        ),
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
    from rich.text import Text

    from panel_cli.store.reader import TranscriptReader
    from panel_cli.view import history as view

    # The reader takes a search with no word as no search at all; asked for here, that would
    # list every run as if each held the text.
    if search is not None and not re.search(r"\w", search):
        raise UserError(f"--search {search!r} holds no word to search for; give one or more words.")
    after = moment(since, "--since") if since is not None else None
    given = {"status": status, "protocol": protocol, "search": search, "since": after}
    # Only the filters given are passed, so the reader's defaults decide the rest.
    filters: dict[str, Any] = {name: value for name, value in given.items() if value is not None}
    with TranscriptReader.open(db) as reader:
        if protocol is not None:
            known_protocol(reader, protocol)
        runs = [clean_record(run) for run in reader.list_runs(limit, **filters)]
        if as_json:
            from panel_cli.view.history_json import run_row

            _print_json([run_row(run) for run in runs])
            return
        if not runs:
            said = view.nothing_found(reader.path, reader.count_runs(), status, protocol, search, after)
            view.console().print(Text(said), soft_wrap=True)  # a long path stays whole
            return
        short_ids = {run.id: reader.short_id(run.id) for run in runs}
    console = view.table_console()
    console.print(view.runs_table(runs, short_ids, view.table_width(console)))


@history_app.command("show")
def show_run(
    run_id: RunIdArgument,
    plain: Annotated[
        bool, typer.Option("--plain", help="Each event as a plain line instead of the protocol's tables.")
    ] = False,
    full: Annotated[
        bool, typer.Option("--full", help="Every reply in full on a terminal too, where long ones are folded.")
    ] = False,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Show one run: its header, every round as the protocol's own tables, the final answer, every reply in full and every call."""
    from panel_cli.store.reader import TranscriptReader

    with TranscriptReader.open(db) as reader:
        run = clean_record(reader.get_run(run_id))
        calls = [clean_record(call) for call in reader.run_calls(run.id)]
        payloads = clean_strings(reader.run_events(run.id))  # text stored before it was cleaned on the way in
        threaded = [run.id, *(line.run_id for line in (*run.thread.ancestors, *run.thread.follow_ups))]
        short_ids = {thread_id: reader.short_id(thread_id) for thread_id in threaded}
    if as_json:
        from panel_cli.view.history_json import run_detail

        _print_json(run_detail(run, calls, payloads))
        return
    from panel_cli.view import history as view

    console = view.table_console()
    if plain:
        from panel_cli.view.history_show import show_plain

        show_plain(console, run, calls, payloads, short_ids)
    else:
        from panel_cli.view.history_show import show

        show(console, run, calls, payloads, short_ids, fold=not full)


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
    from rich.text import Text

    from panel_cli.store.reader import TranscriptReader
    from panel_cli.view import history as view

    factor = _speed(speed)
    with TranscriptReader.open(db) as reader:
        run = reader.get_run(run_id)
        payloads = clean_strings(reader.run_events(run.id))
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
    console = view.console()
    plain = plain or not console.is_terminal
    pace = "no waiting" if factor is None else ("real time" if factor == 1 else f"{factor:g}× speed")
    console.print(
        Text(
            f"Replay of run {run.id} from {view.local_time(run.started_at)}, {pace}; no model is called.", style="dim"
        ),
        soft_wrap=True,
    )
    shown: View = PlainView(console.file) if plain else LiveView(console)
    try:
        asyncio.run(play(shown, events, speed=factor))
    except KeyboardInterrupt:
        raise Interrupted(signal.SIGINT) from None  # Typer would exit 130 without a word
    if plain:
        view.print_plain_answer(console, payloads)


def _speed(text: str) -> float | None:
    """`10`, `1`, `0.5`; `0` and `max` mean no waiting (None). Slower than MIN_SPEED would
    wait for ever."""
    import math

    if text.strip().lower() == "max":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if math.isnan(value) or value < 0 or 0 < value < MIN_SPEED:
        raise UserError(
            f"--speed takes a number of times faster than the run from {MIN_SPEED:g} up (10, 1, 0.5),"
            f" or 0 or max for no waiting, not '{text}'."
        )
    return None if value == 0 or math.isinf(value) else value


@history_app.command("delete")
def delete_run(run_id: RunIdArgument, yes: YesOption = False, db: DbOption = None) -> None:
    """Delete one run: its events, calls and texts no other run shares. Asks first unless --yes."""
    from rich.text import Text

    from panel_cli.store.maintenance import delete_run as delete_stored_run
    from panel_cli.store.maintenance import refuse_running
    from panel_cli.store.reader import TranscriptReader
    from panel_cli.view import fmt
    from panel_cli.view import history as view

    with TranscriptReader.open(db) as reader:
        run = reader.get_run(run_id)
        path = reader.path
        short_ids = {line.run_id: reader.short_id(line.run_id) for line in run.thread.follow_ups}
    refuse_running(run.id, run.status, run.pid, run.host)
    described = f"run {run.id} ({run.protocol or 'unknown protocol'}, {run.status}, {view.started(run, seconds=False)})"
    follow_ups = view.follow_ups_note(run, short_ids)
    if not yes:
        question = fmt.one_line(run.question, view.QUESTION_PREVIEW)
        typer.echo(f"{described[0].upper()}{described[1:]}: {question}", err=True)
        if follow_ups:
            typer.echo(follow_ups, err=True)
        _confirm("Delete it?")
    delete_stored_run(path, run.id)
    kept = f"; {view.follow_ups_kept(run)}" if run.thread.follow_ups else ""
    view.console().print(Text(f"Deleted {described}{kept}."), soft_wrap=True)


@history_app.command("purge")
def purge_runs(
    older_than: Annotated[
        str,
        typer.Option(
            "--older-than",
            metavar="WHEN",
            help="Delete runs started before this: a span of an hour or more (90m, 12h, 30d) or a date (2025-01-31).",
        ),
    ],
    status: Annotated[RunStatusOption | None, typer.Option("--status", help="Only runs with this status.")] = None,
    yes: YesOption = False,
    db: DbOption = None,
) -> None:
    """Delete the runs started before a time (of one status, if given); says how many, and asks first."""
    from rich.text import Text

    from panel_cli.store.maintenance import purge_runs as purge_stored_runs
    from panel_cli.store.reader import TranscriptReader
    from panel_cli.view import history as view
    from panel_cli.wording import plural

    cutoff = moment(older_than, "--older-than", shortest=MIN_PURGE_SPAN)
    with TranscriptReader.open(db) as reader:
        doomed, writing = _runs_before(reader, cutoff, status)
        path = reader.path
    kind = f"{status} " if status else ""
    before = view.local_time(cutoff, seconds=False)
    if not doomed:
        said = f"No {kind}runs started before {before} in {path}; nothing to delete."
        if writing:
            said = (
                f"Nothing to delete in {path}: the {plural(writing, f'{kind}run')} started before {before} "
                f"{'is' if writing == 1 else 'are'} still being written."
            )
        view.console().print(Text(said), soft_wrap=True)
        return
    counted = f"{plural(len(doomed), f'{kind}run')} started before {before}"
    if not yes:
        _confirm(f"Delete {counted} from {path}?")
    deleted = purge_stored_runs(path, older_than=cutoff, status=status)
    view.console().print(Text(f"Deleted {plural(len(deleted), f'{kind}run')} started before {before}."), soft_wrap=True)


def _stored_tally(payload: dict[str, Any]) -> None:
    """A vote's stored count is the tally the vote made (`Tally`), or a ValidationError: the
    event only says it is a mapping, and show, replay, export and retally read it whole."""
    if payload.get("type") == "vote_tallied":
        from panel_cli.protocols.vote.tally import Tally

        Tally.model_validate(payload.get("tally"))


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
    from rich.text import Text

    from panel_cli.store.merge import import_runs as import_stored_runs
    from panel_cli.view import history as view
    from panel_cli.wording import plural

    report = import_stored_runs(db, other, check_event=_stored_tally)
    if as_json:
        _print_json(report.model_dump(mode="json"))
        return
    evals = f" and {plural(len(report.evals), 'eval')}" if report.evals else ""
    parts = [f"Imported {plural(len(report.imported), 'run')}{evals} from {report.source} into {report.target}"]
    if report.skipped or report.evals_skipped:
        there = [
            plural(len(found), noun)
            for found, noun in ((report.skipped, "run"), (report.evals_skipped, "eval"))
            if found
        ]
        parts.append(f"skipped {' and '.join(there)} already there")
    if report.running:
        parts.append(
            f"left {plural(len(report.running), 'run')} still running on this host (import again once it ends)"
        )
    view.console().print(Text("; ".join(parts) + "."), soft_wrap=True)


def _runs_before(
    reader: TranscriptReader, cutoff: float, status: RunStatusOption | None
) -> tuple[list[RunSummary], int]:
    """The runs a purge would delete, to count them before asking: started before `cutoff`,
    with `status` if given, and none whose process is still writing it (a stored `running`
    run is purged only when it is stale); and how many of those it keeps for that reason."""
    listed = "stale" if status == "running" else status
    started = [run for run in reader.list_runs(-1, status=listed) if run.started_at < cutoff]
    doomed = [run for run in started if run.status != "running"]
    return doomed, len(started) - len(doomed)


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
    from panel_cli.store.reader import TranscriptReader
    from panel_cli.view import history as view

    with TranscriptReader.open(db) as reader:
        report = clean_record(reader.stats())
        path = reader.path
    if as_json:
        _print_json(report.model_dump(mode="json"))
        return
    from panel_cli.view.stats import draw_stats

    draw_stats(view.table_console(), path, report)


@history_app.command("decisions")
def list_decisions(
    topic: Annotated[
        str | None, typer.Option("--topic", help="Only decisions whose topic (question) holds this text, in any case.")
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", min=1, max=MAX_LIMIT, help="How many decisions to show, newest first.")
    ] = 20,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """List the decisions `panel decide` made: topic, winner, counts, method, leader."""
    from dataclasses import asdict

    from rich.text import Text

    from panel_cli.store.reader import TranscriptReader
    from panel_cli.view import history as view

    with TranscriptReader.open(db) as reader:
        decisions = [clean_record(decision) for decision in reader.list_decisions(limit, topic=topic)]
        if as_json:
            _print_json([asdict(decision) for decision in decisions])
            return
        if not decisions:
            where = f" about '{topic}'" if topic else ""
            view.console().print(Text(f"No decisions{where} in {reader.path}."), soft_wrap=True)
            return
        short_ids = {decision.run_id: reader.short_id(decision.run_id) for decision in decisions}
    console = view.table_console()
    console.print(view.decisions_table(decisions, short_ids, view.table_width(console)))


@history_app.command("retally")
def retally_run(
    run_id: Annotated[
        str,
        typer.Argument(
            metavar="ID",
            help="A vote or decide run's id, any unique beginning of one, or last.",
            autocompletion=completion.retallyable_run_ids,
        ),
    ],
    method: Annotated[
        str | None,
        typer.Option(
            "--method",
            help="majority, supermajority, unanimous, ranked_choice, weighted, plurality or weighted_plurality "
            "(default: the run's).",
            autocompletion=completion.field_values("method"),
        ),
    ] = None,
    tie_break: Annotated[
        str | None,
        typer.Option(
            "--tie-break",
            help="plurality methods: none, leader or first settles a tie (default: the run's).",
            autocompletion=completion.field_values("tie_break"),
        ),
    ] = None,
    threshold: Annotated[
        float | None,
        typer.Option(
            "--threshold", help="supermajority: the share to exceed, above 0 and below 1 (default: the run's)."
        ),
    ] = None,
    quorum: Annotated[
        int | None,
        typer.Option("--quorum", min=1, max=MAX_QUORUM, help="Fewest ballots for a winner (default: the run's)."),
    ] = None,
    as_json: JsonOption = False,
    db: DbOption = None,
) -> None:
    """Count a stored vote or decision again from its stored ballots, with no model call, and keep the re-tally."""
    import uuid

    from rich.text import Text

    from panel_cli.protocols import registry
    from panel_cli.protocols.vote.tally import TIE_BREAKS, parse_choice, parse_method, retally, stored_vote
    from panel_cli.store.maintenance import record_retally
    from panel_cli.store.reader import TranscriptReader
    from panel_cli.store.records import RetallyRecord
    from panel_cli.thresholds import threshold_problem
    from panel_cli.view import history as view

    if threshold is not None and (problem := threshold_problem(threshold)) is not None:
        raise UserError(f"--threshold: {problem}.")
    chosen = parse_method(method) if method is not None else None
    settle = parse_choice(tie_break, TIE_BREAKS) if tie_break is not None else None
    if tie_break is not None and settle is None:
        raise UserError(f"--tie-break: '{tie_break}' is not a tie break; choose none, leader or first.")
    with TranscriptReader.open(db) as reader:
        run = reader.get_run(run_id)
        retallies = registry.is_protocol(run.protocol) and registry.spec(run.protocol).retallies
        events = reader.run_events(run.id) if retallies else []
        path = reader.path
    if not retallies:
        kinds = " and ".join(spec.name for spec in registry.specs() if spec.retallies)
        raise UserError(f"Run {run.id} is a {run.protocol} run; only {kinds} runs have ballots to re-tally.")
    vote = stored_vote(events)
    if vote is None:
        raise UserError(f"Run {run.id} has no stored vote to re-tally: it ended before its vote opened.")
    if threshold is not None and (chosen or vote.method) != "supermajority":
        raise UserError(f"--threshold applies to --method supermajority, not {chosen or vote.method}.")
    recount = retally(vote, method=chosen, threshold=threshold, quorum=quorum, tie_break=settle)
    stored = _stored_outcome(run.result)
    retally_id = uuid.uuid4().hex[:12]
    recounted = {
        "winner": recount.winner,
        "leader": recount.leader,
        "leader_override": recount.leader_override,
        "reason": recount.reason if recount.winner is None else None,
        **recount.tally.model_dump(mode="json", exclude={"winner", "reason"}),
        "tally_winner": recount.tally.winner,
    }
    payload = {
        "retally_id": retally_id,
        "run_id": run.id,
        "protocol": run.protocol,
        "question": run.question,
        "stored": stored,
        "retally": recounted,
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
    from panel_cli.view.retally import draw_retally

    errors = view.console(stderr=True)
    for warning in recount.warnings:
        errors.print(Text(f"warning: {warning}", style="yellow"))
    draw_retally(view.console(), run, stored, recounted, recount.tally, retally_id)


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


def _print_json(data: Any) -> None:
    """Plain `print`, not Rich: JSON on stdout must not be wrapped or coloured."""
    import json

    print(json.dumps(data, indent=2, ensure_ascii=False))


history_app.command("export")(export_run)
