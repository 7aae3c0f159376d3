"""The corners of `panel history` a new user hit: `last` as a run id, a purge that reads `1m`
as a minute, tables cut to 80 columns in a pipe, replies cut to a cell, a protocol that does
not exist. Each through the CLI, in-process."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from panel_cli.cli.app import app
from panel_cli.events import CallFinished, RunFinished, StageStarted
from panel_cli.store.reader import TranscriptReader
from tests.helpers import cli, cli_ok, cli_refused
from tests.store.sample_runs import confer_run, record, run_started

LONG_QUESTION = (
    "Should the audit log live in PostgreSQL, " + "with every row signed and kept for seven years, " * 4 + "?"
)
LONG_REPLY = "\n".join(f"Line {number}: " + "the reasons go on " * 8 for number in range(1, 31))


def history(*args: str, columns: int | None = 200, env: dict[str, str] | None = None) -> str:
    """`panel history ARGS`, which must succeed; `columns=None`: piped, no COLUMNS."""
    return cli_ok("history", *args, columns=columns, env=env)


def refused(*args: str) -> str:
    return cli_refused("history", *args)


def long_run(run_id: str) -> list:
    """One member answers at length: thirty lines, each longer than any table cell."""
    started = run_started(LONG_QUESTION).model_copy(update={"panel": "a-panel-with-a-long-name-for-the-audit-team"})
    return [
        started,
        StageStarted(stage="answer", round=0, members=["gpt"]),
        CallFinished(
            call_id=f"{run_id}-1",
            member="gpt",
            model="openai/gpt-4o",
            stage="answer",
            round=0,
            text=LONG_REPLY,
            tokens_in=10,
            tokens_out=900,
            latency=1.0,
        ),
        RunFinished(final_answer="Keep it in PostgreSQL.", result={"winner": "gpt"}),
    ]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    path = tmp_path / "runs.db"
    asyncio.run(record(path, "89c0ffee-older", confer_run("89c0ffee-older")))
    time.sleep(0.01)  # a later start: `last` is the next one
    asyncio.run(record(path, "89c0ffee-newest", long_run("89c0ffee-newest")))
    return path


# -- `last` ------------------------------------------------------------------------------


def test_every_command_that_takes_a_run_id_takes_last(db: Path, tmp_path: Path) -> None:
    shown = history("show", "last", "--db", str(db))
    assert shown.startswith("Run       89c0ffee-newest")
    assert json.loads(history("show", "LAST", "--json", "--db", str(db)))["run_id"] == "89c0ffee-newest"
    exported = tmp_path / "last.md"
    history("export", "last", "-o", str(exported), "--db", str(db))
    assert "Keep it in PostgreSQL." in exported.read_text(encoding="utf-8")
    assert "Replay of run 89c0ffee-newest" in history("replay", "last", "--speed", "max", "--db", str(db))
    history("delete", "last", "--yes", "--db", str(db))
    with TranscriptReader.open(db) as reader:
        assert [run.id for run in reader.list_runs()] == ["89c0ffee-older"]
    assert "run 89c0ffee-older" in history("delete", "last", "--yes", "--db", str(db))
    assert refused("show", "last", "--db", str(db)) == f"There is no run in {db} yet, so no last one."


def test_completion_offers_last_and_survives_a_damaged_row(db: Path) -> None:
    import sqlite3

    import typer

    from panel_cli.cli import completion

    context = typer.Context(typer.main.get_command(app))
    context.params["db"] = str(db)
    assert completion.run_ids(context, "la") == [("last", "the run started last")]
    assert [run_id for run_id, _ in completion.run_ids(context, "89c")] == ["89c0ffee-newest", "89c0ffee-older"]
    with sqlite3.connect(db) as connection:
        connection.execute("UPDATE runs SET started_at = 'garbage', question_text = NULL WHERE id = '89c0ffee-older'")
    connection.close()
    assert [run_id for run_id, _ in completion.run_ids(context, "89c0ffee-o")] == ["89c0ffee-older"]


# -- purge -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("span", "said"),
    [
        ("1m", "1 minute (m is minutes)"),
        ("30m", "30 minutes (m is minutes)"),
        ("59s", "59 seconds"),
        ("0.5h", "0.5 hours"),
    ],
)
def test_purge_refuses_a_span_under_an_hour(db: Path, span: str, said: str) -> None:
    assert refused("purge", "--older-than", span, "--yes", "--db", str(db)) == (
        f"--older-than {span} is {said}: a span shorter than an hour would delete nearly every run,"
        " so give one of an hour or more (90m, 12h, 30d) or a date (2025-01-31)."
    )
    with TranscriptReader.open(db) as reader:
        assert reader.count_runs() == 2


def test_purge_takes_a_span_of_an_hour_or_more_written_in_minutes(db: Path) -> None:
    output = history("purge", "--older-than", "90m", "--yes", "--db", str(db))
    assert output.startswith("No runs started before ") and output.endswith("; nothing to delete.\n")


def test_purge_says_how_many_it_will_delete_before_asking(db: Path) -> None:
    tomorrow = time.strftime("%Y-%m-%d", time.localtime(time.time() + 86400))
    result = cli("history", "purge", "--older-than", tomorrow, "--db", str(db), input="n\n")
    assert result.exit_code == 1
    assert f"Delete 2 runs started before {tomorrow} 00:00 from {db}? [y/N]" in result.stderr
    assert "Nothing deleted." in result.stderr
    with TranscriptReader.open(db) as reader:
        assert reader.count_runs() == 2


# -- piped output ----------------------------------------------------------------------------


def test_piped_list_cuts_nothing(db: Path) -> None:
    listed = history("list", "--db", str(db), columns=None)
    newest = next(line for line in listed.splitlines() if line.startswith("89c0ffee-n"))
    assert " ".join(LONG_QUESTION.split()) in newest, "the whole question"
    assert "a-panel-with-a-long-name-for-the-audit-team" in newest
    assert "…" not in listed
    assert max(len(line) for line in listed.splitlines()) > 200


def test_list_in_columns_given_by_columns_never_cuts_an_id(db: Path) -> None:
    listed = history("list", "--db", str(db), columns=60)
    lines = listed.splitlines()
    assert all(len(line) <= 60 for line in lines)
    assert lines[1].startswith("89c0ffee-n ") and lines[2].startswith("89c0ffee-o ")


def test_piped_decisions_cut_no_id(tmp_path: Path) -> None:
    from panel_cli.events import DecisionRecorded

    path = tmp_path / "runs.db"
    topic = "Which queue should the billing service use, given " + "its many constraints, " * 5
    decided = DecisionRecorded(
        topic=topic,
        winner="RabbitMQ",
        vote_counts={"RabbitMQ": 3, "Kafka": 1},
        method="majority",
        total_votes=4,
        ballots_cast=4,
    )
    for run_id in ("89c1aaaa-1", "89c1bbbb-2"):
        asyncio.run(record(path, run_id, [run_started(topic), decided, RunFinished(final_answer="RabbitMQ")]))
    listed = history("decisions", "--db", str(path), columns=None)
    assert "89c1aaaa" in listed and "89c1bbbb" in listed and "…" not in listed
    assert " ".join(topic.split()) in listed


# -- every reply in full -----------------------------------------------------------------------


def test_show_prints_every_reply_whole_off_a_terminal(db: Path) -> None:
    shown = history("show", "89c0ffee-newest", "--db", str(db), columns=None)
    assert "Replies" in shown and "round 0 · answer · gpt (openai/gpt-4o)" in shown
    for line in LONG_REPLY.splitlines():
        assert " ".join(line.split()) in " ".join(shown.split()), line
    assert shown.index("Replies") < shown.index("Calls")


def test_show_folds_a_long_reply_on_a_terminal_unless_full(db: Path) -> None:
    terminal = {"TTY_COMPATIBLE": "1", "NO_COLOR": "1"}
    folded = history("show", "89c0ffee-newest", "--db", str(db), env=terminal)
    assert "Line 12: " in folded and "Line 13: " not in folded
    assert "… 18 more lines (--full shows them)" in folded
    full = history("show", "89c0ffee-newest", "--full", "--db", str(db), env=terminal)
    assert "Line 30: " in full and "more lines" not in full


def test_the_markdown_export_gives_every_reply_whole(db: Path) -> None:
    exported = history("export", "89c0ffee-newest", "--format", "md", "--db", str(db))
    for line in LONG_REPLY.splitlines():
        assert f"> {line}" in exported


# -- a protocol that does not exist ---------------------------------------------------------------


def test_list_of_a_protocol_that_does_not_exist_is_refused_with_the_ones_that_do(db: Path) -> None:
    from panel_cli.protocols.registry import names

    assert refused("list", "--protocol", "votes", "--db", str(db)) == (
        f"--protocol: 'votes' is not a protocol; did you mean 'vote'? choose one of {', '.join(names())}."
    )


def test_list_of_a_protocol_only_stored_runs_have_is_taken(tmp_path: Path) -> None:
    path = tmp_path / "runs.db"
    plugin = run_started().model_copy(update={"protocol": "tournament"})
    asyncio.run(record(path, "t1", [plugin, RunFinished(final_answer="x")]))
    listed = json.loads(history("list", "--protocol", "tournament", "--json", "--db", str(path)))
    assert [run["run_id"] for run in listed] == ["t1"]
    assert history("list", "--protocol", "vote", "--db", str(path)).startswith("No vote runs in ")
