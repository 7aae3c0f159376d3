"""A resume finishes what it starts: the run it takes over becomes `resumed`, linked both ways,
and is not resumed again (`--force` after a resume that failed or crashed); a claim taken
before the first call keeps two resumes of one run from both paying for it.

Runs are the starter vote panel on the fake server (`tests.cli.test_resume`); a run is made
"interrupted" by marking a finished one so (every call of it answered), and a claim is held by
the test itself while the CLI runs, so nothing here depends on timing.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from typer.testing import CliRunner

from panel_cli.cli.app import app
from panel_cli.errors import UserError
from panel_cli.store.claims import take_claims
from panel_cli.store.connection import connect
from panel_cli.store.processes import this_host
from panel_cli.store.reader import TranscriptReader
from tests.cli.test_resume import PERSONA, on_fake_server, relay_briefs  # noqa: F401  (the fixture relays briefs here too)
from tests.fakes.openai_server import FakeOpenAIServer, hang
from tests.helpers import cli, cli_json, finish, start_panel, stored_count, wait_until


def interrupted_vote(server: FakeOpenAIServer, folder: Path) -> tuple[Path, dict]:
    """A vote run with every call answered, then marked interrupted: its database and result."""
    db = folder / "runs.db"
    first = cli_json("run", str(on_fake_server("vote", server, folder)), "--db", str(db))
    mark(db, first["run_id"], "interrupted")
    return db, first


def mark(db: Path, run_id: str, status: str, **columns: object) -> None:
    sets = ", ".join(f"{name} = ?" for name in ["status", *columns])
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        con.execute(f"UPDATE runs SET {sets} WHERE id = ?", (status, *columns.values(), run_id))


def claims(db: Path) -> list[tuple]:
    with contextlib.closing(sqlite3.connect(db)) as con:
        return con.execute("SELECT kind, target, pid, host FROM claims").fetchall()


def refusal(*args: str) -> str:
    """`panel ARGS` in process, refused as bad input (a UserError: exit 2): its one sentence."""
    outcome = cli(*args)
    assert isinstance(outcome.exception, UserError), (outcome.output, outcome.exception)
    assert outcome.exception.exit_code == 2 and "\n" not in outcome.exception.message
    return outcome.exception.message


def dead_pid() -> int:
    """The pid of a process that has ended (and been reaped)."""
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    return child.pid


def test_a_resumed_run_is_marked_linked_both_ways_and_not_resumed_again(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    db, first = interrupted_vote(fake_server, tmp_path)
    source = first["run_id"]
    resumed = cli_json("resume", source, "--db", str(db))
    successor = resumed["run_id"]

    with TranscriptReader.open(db) as reader:
        old, new = reader.get_run(source), reader.get_run(successor)
        short, new_short = reader.short_id(source), reader.short_id(successor)
    assert (old.status, old.resumed_by) == ("resumed", successor)
    assert (new.status, new.resumed_from, new.resumed_by) == ("finished", source, None)
    assert claims(db) == []  # released once the resume ended

    shown_old = cli("history", "show", source, "--db", str(db)).stdout
    assert f"resumed by run {successor}" in shown_old
    shown_new = cli("history", "show", successor, "--db", str(db)).stdout
    assert f"Resumes   run {source}, which stopped before its end" in shown_new
    old_json = cli_json("history", "show", source, "--db", str(db))
    new_json = cli_json("history", "show", successor, "--db", str(db))
    assert (old_json["status"], old_json["resumed_by"], old_json["resumed_from"]) == ("resumed", successor, None)
    assert (new_json["resumed_from"], new_json["resumed_by"]) == (source, None)
    listed = {row["run_id"]: row for row in cli_json("history", "list", "--db", str(db))}
    assert listed[source]["status"] == "resumed" and listed[source]["resumed_by"] == successor
    assert [row["run_id"] for row in cli_json("history", "list", "--status", "resumed", "--db", str(db))] == [source]
    markdown = tmp_path / "old.md"
    assert cli("history", "export", source, "-o", str(markdown), "--db", str(db)).exit_code == 0
    assert f"**resumed by:** {successor}" in markdown.read_text()
    exported = tmp_path / "new.json"
    assert cli("history", "export", successor, "-o", str(exported), "--db", str(db)).exit_code == 0
    assert json.loads(exported.read_text())["resumed_from"] == source

    before = len(fake_server.requests)
    assert refusal("resume", source, "--db", str(db)) == (
        f"Run {short} was already resumed, by run {new_short}, which has finished;"
        f" `panel history show {new_short}` shows it."
    )
    assert refusal("resume", source, "--force", "--db", str(db)).startswith(f"Run {short} was already resumed")
    assert len(fake_server.requests) == before
    with TranscriptReader.open(db) as reader:
        assert [run.id for run in reader.list_runs(-1)] == [successor, source]


@pytest.mark.subprocess
def test_force_resumes_again_only_after_a_resume_that_failed_or_crashed(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    db, first = interrupted_vote(fake_server, tmp_path)
    source = first["run_id"]
    successor = cli_json("resume", source, "--db", str(db))["run_id"]
    with TranscriptReader.open(db) as reader:
        short, new_short = reader.short_id(source), reader.short_id(successor)

    mark(db, successor, "interrupted")
    assert refusal("resume", source, "--force", "--db", str(db)) == (
        f"Run {short} was already resumed, by run {new_short}, which was interrupted;"
        f" continue that one instead: `panel resume {new_short}`."
    )
    mark(db, successor, "failed", error="RuntimeError: boom")
    assert refusal("resume", source, "--db", str(db)) == (
        f"Run {short} was already resumed, by run {new_short}, which failed;"
        f" continue that one (`panel resume {new_short}`), or give --force to resume {short} again."
    )
    mark(db, successor, "running", pid=dead_pid(), host=this_host())
    assert "which crashed; continue that one" in refusal("resume", source, "--db", str(db))

    again = cli_json("resume", source, "--force", "--db", str(db))
    with TranscriptReader.open(db) as reader:
        old = reader.get_run(source)
        assert (old.status, old.resumed_by) == ("resumed", again["run_id"])
        assert reader.get_run(again["run_id"]).resumed_from == source
    assert again["reached_answer"]


@pytest.mark.subprocess  # dead_pid starts one (the marker main's suite requires)
def test_force_takes_over_the_resume_it_abandons_so_the_run_is_not_finished_twice(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """The first resume crashed; `--force` resumes the run again. The crashed resume is taken
    over too: resuming it afterwards would finish the same run a second time and pay its later
    calls again."""
    db, first = interrupted_vote(fake_server, tmp_path)
    source = first["run_id"]
    abandoned = cli_json("resume", source, "--db", str(db))["run_id"]
    mark(db, abandoned, "running", pid=dead_pid(), host=this_host())

    (held,) = take_claims(db, [("run", abandoned)])  # a resume of the crashed resume, under way
    try:
        refused = refusal("resume", source, "--force", "--db", str(db))
    finally:
        held.release()
    assert refused.startswith(f"Run {abandoned} is already being resumed by panel process {held.pid}")
    assert claims(db) == []

    forced = cli_json("resume", source, "--force", "--db", str(db))["run_id"]
    with TranscriptReader.open(db) as reader:
        taken = reader.get_run(abandoned)
        assert (taken.status, taken.resumed_by) == ("resumed", forced)
        assert reader.get_run(source).resumed_by == forced
        abandoned_short, forced_short = reader.short_id(abandoned), reader.short_id(forced)
    before = len(fake_server.requests)
    assert refusal("resume", abandoned, "--db", str(db)) == (
        f"Run {abandoned_short} was already resumed, by run {forced_short}, which has finished;"
        f" `panel history show {forced_short}` shows it."
    )
    assert refusal("resume", abandoned, "--force", "--db", str(db)).startswith(f"Run {abandoned_short} was already")
    assert len(fake_server.requests) == before
    assert claims(db) == []


def test_a_chain_of_resumes_names_its_latest_run(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    db, first = interrupted_vote(fake_server, tmp_path)
    source = first["run_id"]
    second = cli_json("resume", source, "--db", str(db))["run_id"]
    mark(db, second, "interrupted")
    third = cli_json("resume", second, "--db", str(db))["run_id"]
    with TranscriptReader.open(db) as reader:
        assert reader.get_run(second).resumed_by == third
        short, second_short, third_short = (reader.short_id(run_id) for run_id in (source, second, third))
    assert refusal("resume", source, "--db", str(db)) == (
        f"Run {short} was already resumed, by run {second_short} (and resumed again since: the latest is run"
        f" {third_short}), which has finished; `panel history show {third_short}` shows it."
    )


def test_a_second_resume_while_the_first_holds_the_claim_is_refused_before_any_call(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """The first resume is this test, holding the claim as a resume does before its first call."""
    db, first = interrupted_vote(fake_server, tmp_path)
    source = first["run_id"]
    before = len(fake_server.requests)
    (held,) = take_claims(db, [("run", source)])
    try:
        message = refusal("resume", source, "--db", str(db))
        forced = refusal("resume", source, "--force", "--db", str(db))
    finally:
        held.release()
    assert message.startswith(f"Run {source} is already being resumed by panel process {held.pid} since ")
    assert message.endswith("; let it finish, or stop it and try again.")
    assert forced == message  # a live process of this host is never overtaken
    assert len(fake_server.requests) == before
    with TranscriptReader.open(db) as reader:
        assert reader.get_run(source).status == "interrupted"

    assert cli_json("resume", source, "--db", str(db))["reached_answer"]


@pytest.mark.subprocess
def test_a_claim_whose_process_is_gone_is_taken_over(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    db, first = interrupted_vote(fake_server, tmp_path)
    source = first["run_id"]
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        con.execute(
            "INSERT INTO claims VALUES ('run', ?, ?, ?, '2026-01-01T00:00:00.000000000Z')",
            (source, dead_pid(), this_host()),
        )
    assert cli_json("resume", source, "--db", str(db))["reached_answer"]
    assert claims(db) == []


def test_a_claim_from_another_host_needs_force(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    db, first = interrupted_vote(fake_server, tmp_path)
    source = first["run_id"]
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        con.execute(
            "INSERT INTO claims VALUES ('run', ?, 4242, 'elsewhere.example', '2026-01-01T00:00:00.000000000Z')",
            (source,),
        )
    message = refusal("resume", source, "--db", str(db))
    assert message.startswith(
        f"Run {source} is already being resumed by panel process 4242 on elsewhere.example since "
    )
    assert message.endswith("; if that process is gone, give --force to take it over.")
    assert cli_json("resume", source, "--force", "--db", str(db))["reached_answer"]
    assert claims(db) == []


def test_a_resume_refused_after_claiming_releases_its_claim(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    db, first = interrupted_vote(fake_server, tmp_path)
    mark(db, first["run_id"], "finished")
    refusal("resume", first["run_id"], "--db", str(db))
    assert claims(db) == []


def test_resume_takes_last(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    db, first = interrupted_vote(fake_server, tmp_path)
    resumed = cli_json("resume", "last", "--db", str(db))
    with TranscriptReader.open(db) as reader:
        assert reader.get_run(first["run_id"]).resumed_by == resumed["run_id"]
    assert "already resumed" in refusal("resume", first["run_id"][:8], "--db", str(db))
    assert cli("history", "show", "last", "--db", str(db)).exit_code == 0


@pytest.mark.subprocess
def test_a_resume_killed_mid_run_leaves_a_crashed_successor_to_continue(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """SIGKILL of a resume: the run it started is stale and its claim stays behind with a dead
    process. The source names the crashed run; resuming that one goes on, reusing the answered
    calls of both (the fake server counts), and the dead claim is dropped on the way."""
    db, first = interrupted_vote(fake_server, tmp_path)
    source = first["run_id"]
    with contextlib.closing(sqlite3.connect(db)) as con, con:  # the optimist's ballot was never answered
        con.execute("DELETE FROM calls WHERE run_id = ? AND member = 'optimist'", (source,))
    fake_server.script("optimist", hang())
    before = len(fake_server.requests)
    process = start_panel("resume", source, "--db", str(db))
    try:
        wait_until(lambda: len(fake_server.requests) > before, "the resume's first request", process=process)
        wait_until(
            lambda: stored_count(db, "SELECT count(*) FROM runs WHERE status = 'resumed'") == 1,
            "the source marked resumed",
            process=process,
        )
        process.send_signal(signal.SIGKILL)
    finally:
        finish(process)
    assert [request.model for request in fake_server.requests[before:]] == ["optimist"]
    assert [row[:2] for row in claims(db)] == [("run", source)]  # left behind, its process gone
    with TranscriptReader.open(db) as reader:
        crashed = reader.get_run(source).resumed_by
        assert crashed is not None and reader.get_run(crashed).status == "stale"
        short, crashed_short = reader.short_id(source), reader.short_id(crashed)
    assert refusal("resume", source, "--db", str(db)) == (
        f"Run {short} was already resumed, by run {crashed_short}, which crashed;"
        f" continue that one (`panel resume {crashed_short}`), or give --force to resume {short} again."
    )

    fake_server.script("optimist", PERSONA)
    asked = len(fake_server.requests)
    finished = cli_json("resume", crashed, "--db", str(db))
    assert [request.model for request in fake_server.requests[asked:]] == ["optimist"]
    assert finished["reached_answer"] and finished["total_votes"] == 5
    with TranscriptReader.open(db) as reader:
        assert reader.get_run(crashed).resumed_by == finished["run_id"]
    assert claims(db) == []  # the dead process's claim was dropped when the next one was taken


@pytest.mark.subprocess
def test_completion_offers_only_the_runs_resume_would_take(tmp_path: Path) -> None:
    """`panel resume <TAB>`: interrupted, failed and crashed runs; not a finished one, one still
    running (here, or on a host that cannot be checked), nor one another run took over."""
    db = tmp_path / "runs.db"
    rows = [  # id, status, pid, host; started a minute apart, in this order
        ("a-finished", "finished", None, None),
        ("a-interrupted", "interrupted", None, None),
        ("a-failed", "failed", None, None),
        ("a-crashed", "running", dead_pid(), this_host()),
        ("a-alive", "running", os.getpid(), this_host()),
        ("a-elsewhere", "running", 4242, "elsewhere.example"),
        ("a-resumed", "resumed", None, None),
    ]
    with TranscriptStoreFile(db) as con:
        for minute, (run_id, status, pid, host) in enumerate(rows):
            con.execute(
                "INSERT INTO runs (id, protocol, panel, status, started_at, pid, host) VALUES (?, 'vote', 'p', ?, ?, ?, ?)",
                (run_id, status, f"2026-12-01T10:{minute:02d}:00.000000000Z", pid, host),
            )

    def complete(words: str) -> list[str]:
        env = {"_PANEL_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(len(words.split(" ")) - 1)}
        outcome = CliRunner(env=env).invoke(app, [], prog_name="panel")
        return outcome.output.split()

    assert complete(f"panel resume --db {db} a") == ["a-crashed", "a-failed", "a-interrupted"]
    assert complete(f"panel resume --db {db} l") == []  # the run started last was taken over
    with TranscriptStoreFile(db) as con:
        con.execute("UPDATE runs SET status = 'interrupted' WHERE id = 'a-resumed'")
    assert complete(f"panel resume --db {db} la") == ["last"]
    assert set(complete(f"panel history show --db {db} a")) == {run_id for run_id, *_ in rows}


@contextlib.contextmanager
def TranscriptStoreFile(db: Path) -> Iterator[sqlite3.Connection]:  # noqa: N802  (reads as the file it opens)
    """The store's own file (created and brought forward by it), open for a test to write rows by hand."""
    connect(db).close()
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        yield con


def attached_vote(server: FakeOpenAIServer, folder: Path) -> tuple[Path, dict[str, Path], str]:
    """An interrupted vote run (every ballot answered) with two files attached: the database,
    the files by name and the run's id."""
    files = {"notes": folder / "notes.txt", "prices": folder / "prices.txt"}
    files["notes"].write_text("We bill 40,000 customers a month.\n")
    files["prices"].write_text("PostgreSQL hosting: $50 a month.\n")
    panel_file = on_fake_server("vote", server, folder)
    panel_file.write_text(panel_file.read_text() + "attach: [notes.txt, prices.txt]\n")
    db = folder / "runs.db"
    run_id = cli_json("run", str(panel_file), "--db", str(db))["run_id"]
    mark(db, run_id, "interrupted")
    return db, files, run_id


def test_resume_says_nothing_can_be_reused_when_an_attached_file_changed(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    db, files, run_id = attached_vote(fake_server, tmp_path)
    files["prices"].write_text("PostgreSQL hosting: $80 a month.\n")
    asked = len(fake_server.requests)

    outcome = cli("resume", run_id, "--json", "--db", str(db))

    assert outcome.exit_code == 0, outcome.output
    assert outcome.stderr.splitlines()[0] == (
        f"panel: resuming run {run_id[:8]} (vote): none of its 5 answered calls can be reused, since the attached"
        f" file {files['prices']} has changed since the run; every call is made again."
    )
    assert len(fake_server.requests) - asked == 5 == json.loads(outcome.stdout)["calls"]


def test_resume_with_the_attached_file_as_it_was_reuses_every_answer(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    db, _, run_id = attached_vote(fake_server, tmp_path)
    asked = len(fake_server.requests)

    outcome = cli("resume", run_id, "--json", "--db", str(db))

    assert outcome.exit_code == 0, outcome.output
    assert outcome.stderr.splitlines()[0] == (
        f"panel: resuming run {run_id[:8]} (vote): 5 answered calls in the store, each reused where its request"
        " comes out as it did; the rest are made as usual."
    )
    assert len(fake_server.requests) == asked


def test_a_follow_up_of_a_resumed_run_is_pointed_at_the_run_that_took_it_over(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    db, first = interrupted_vote(fake_server, tmp_path)
    mark(db, first["run_id"], "interrupted", final_answer_text=None)  # as a run stopped half way has none
    successor = cli_json("resume", first["run_id"], "--db", str(db))["run_id"]
    panel_file = str(tmp_path / "vote.yaml")
    assert refusal("run", panel_file, "--continue", first["run_id"], "--db", str(db)) == (
        f"Run {first['run_id'][:8]} has no final answer of its own: run {successor} resumed it; continue that one."
    )
