"""`--continue ID|last`: a follow-up's members see the earlier runs as prior turns.

Panels are the starter demo panels moved onto the fake server (see test_resume), so each run
goes through litellm's real path and the fake server records every request it got.
"""

from __future__ import annotations

import contextlib
import json
import sqlite3
from pathlib import Path
from typing import Any

import pytest

from panel_cli.errors import UserError
from panel_cli.runs import followup
from panel_cli.runs.followup import MAX_THREAD_CHARS, prior_turns
from panel_cli.store.maintenance import delete_run
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.records import RunRecord
from tests.cli.test_resume import on_fake_server, relay_briefs, resume  # noqa: F401 (autouse)
from tests.fakes.openai_server import FakeOpenAIServer, RecordedRequest
from tests.helpers import cli, cli_json, panel_process

# `relay_briefs`, imported above, is autouse here too: the fake server answers each call as its
# demo persona would, a ballot as a ballot rather than an echo of the prompt naming every option.


def conversation(request: RecordedRequest | list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A request's messages after the member's system prompt."""
    messages = request.messages if isinstance(request, RecordedRequest) else request
    return [message for message in messages if message["role"] != "system"]


def turns(*runs: dict[str, Any]) -> list[dict[str, Any]]:
    return [
        turn
        for run in runs
        for turn in (
            {"role": "user", "content": run["question"]},
            {"role": "assistant", "content": run["final_answer"]},
        )
    ]


def refusal(*args: str) -> str:
    """The one sentence a refused `--continue` gives (CliRunner hands back the UserError)."""
    outcome = cli(*args)
    assert isinstance(outcome.exception, UserError), outcome.output
    return outcome.exception.message


def test_every_request_of_a_follow_up_carries_the_earlier_turn(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    panel_file = on_fake_server("council", fake_server, tmp_path)
    db = str(tmp_path / "runs.db")
    first = cli_json("council", str(panel_file), "--db", db, "-q", "Should we split the monolith?")
    before = len(fake_server.requests)

    follow = cli_json(
        "council", str(panel_file), "--db", db, "-q", "Which service goes first?", "--continue", first["run_id"][:8]
    )

    new = fake_server.requests[before:]
    assert len(new) == follow["calls"] > 0
    for request in new:
        messages = conversation(request)
        assert messages[:2] == turns(first), request.model
        assert messages[2]["role"] == "user" and "Which service goes first?" in messages[2]["content"]
    assert follow["parent_id"] == first["run_id"] and first["parent_id"] is None
    with TranscriptReader.open(db) as reader:
        record = reader.get_run(follow["run_id"])
        calls = reader.run_calls(follow["run_id"])
    assert record.parent_id == first["run_id"] and record.config["parent_id"] == first["run_id"]
    assert len(calls) == len(new) and all(conversation(call.messages)[:2] == turns(first) for call in calls)
    listed = json.loads(cli("history", "list", "--json", "--db", db).stdout)
    assert [(run["run_id"], run["parent_id"]) for run in listed] == [
        (follow["run_id"], first["run_id"]),
        (first["run_id"], None),
    ]


def test_the_attachments_go_to_the_new_question_not_the_earlier_turn(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    panel_file = on_fake_server("ensemble", fake_server, tmp_path)
    notes = tmp_path / "notes.txt"
    notes.write_text("The budget is 40k.\n")
    db = str(tmp_path / "runs.db")
    first = cli_json("ensemble", str(panel_file), "--db", db, "-q", "Rent or buy the servers?")
    before = len(fake_server.requests)

    cli_json(
        "ensemble", str(panel_file), "--db", db, "-q", "And the racks?", "--continue", "last", "--attach", str(notes)
    )

    for request in fake_server.requests[before:]:
        messages = conversation(request)
        assert messages[:2] == turns(first)
        attached, _, asked = messages[2]["content"].partition("The budget is 40k.")
        assert attached.startswith("Files attached to the question follow.") and "And the racks?" in asked


def test_continue_last_takes_the_latest_run(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    panel_file = on_fake_server("vote", fake_server, tmp_path)
    db = str(tmp_path / "runs.db")
    cli_json("vote", str(panel_file), "--db", db, "-q", "Tabs or spaces?")
    latest = cli_json("vote", str(panel_file), "--db", db, "-q", "Vim or Emacs?")
    before = len(fake_server.requests)

    follow = cli_json("vote", str(panel_file), "--db", db, "-q", "Light or dark theme?", "--continue", "last")

    assert follow["parent_id"] == latest["run_id"]
    assert all(conversation(request)[:2] == turns(latest) for request in fake_server.requests[before:])


def test_a_chain_of_three_carries_the_whole_thread_oldest_first(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    panel_file = on_fake_server("confer", fake_server, tmp_path)
    db = str(tmp_path / "runs.db")
    first = cli_json("confer", str(panel_file), "--db", db, "-q", "Which queue for the audit events?")
    second = cli_json(
        "confer", str(panel_file), "--db", db, "-q", "How many partitions?", "--continue", first["run_id"]
    )
    before = len(fake_server.requests)

    third = cli_json("confer", str(panel_file), "--db", db, "-q", "And the retention?", "--continue", second["run_id"])

    assert (second["parent_id"], third["parent_id"]) == (first["run_id"], second["run_id"])
    for request in fake_server.requests[before:]:
        messages = conversation(request)
        assert messages[:4] == turns(first, second)
        assert messages[4]["role"] == "user"

    shown = cli("history", "show", second["run_id"], "--db", db)
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    start = next(index for index, line in enumerate(lines) if line.rstrip() == "Thread")
    thread = [line.rstrip() for line in lines[start + 1 : start + 4]]
    assert thread[0].startswith(f"  {first['run_id'][:8]}") and "Which queue for the audit events?" in thread[0]
    assert thread[1].startswith(f"▸ {second['run_id'][:8]}") and "How many partitions?" in thread[1]
    assert thread[2].startswith(f"  ↳ {third['run_id'][:8]}") and "And the retention?" in thread[2]
    assert "→ " + " ".join(third["final_answer"].split())[:20] in thread[2]

    detail = json.loads(cli("history", "show", second["run_id"], "--db", db, "--json").stdout)
    assert detail["parent_id"] == first["run_id"]
    assert [(run["run_id"], run["depth"]) for run in detail["thread"]["ancestors"]] == [(first["run_id"], 1)]
    assert [(run["run_id"], run["parent_id"], run["depth"]) for run in detail["thread"]["follow_ups"]] == [
        (third["run_id"], second["run_id"], 1)
    ]
    assert detail["thread"]["follow_ups"][0]["question"] == "And the retention?"


@pytest.mark.subprocess
def test_an_unknown_id_is_one_sentence_and_exit_2(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    panel_file = on_fake_server("vote", fake_server, tmp_path)
    db = tmp_path / "runs.db"
    done = panel_process("vote", str(panel_file), "--db", str(db), "--continue", "abc123")
    assert done.returncode == 2
    assert done.stderr == "panel: No run has the id 'abc123'; `panel history list` shows the stored runs.\n"
    assert fake_server.requests == [] and not db.exists()
    assert (
        refusal("vote", str(panel_file), "--db", str(db), "--continue", "last")
        == f"--continue last found no run to continue in {db}."
    )


@pytest.mark.parametrize("dry_run", [(), ("--dry-run",)])
def test_an_empty_id_is_refused_not_read_as_no_follow_up(
    dry_run: tuple[str, ...], fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """`--continue "$RUN"` with the variable unset must not run without the thread it asked for."""
    panel_file = on_fake_server("vote", fake_server, tmp_path)
    db = tmp_path / "runs.db"
    cli_json("vote", str(panel_file), "--db", str(db))
    before = len(fake_server.requests)

    message = refusal("vote", str(panel_file), "--db", str(db), "--continue", "", *dry_run)

    assert message == "No run has the id ''; `panel history list` shows the stored runs."
    assert len(fake_server.requests) == before


def test_an_ambiguous_id_is_refused(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    panel_file = on_fake_server("vote", fake_server, tmp_path)
    db = tmp_path / "runs.db"
    first = cli_json("vote", str(panel_file), "--db", str(db))
    second = cli_json("vote", str(panel_file), "--db", str(db))
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        con.execute("UPDATE runs SET id = 'aa' || id WHERE id IN (?, ?)", (first["run_id"], second["run_id"]))
    before = len(fake_server.requests)

    message = refusal("vote", str(panel_file), "--db", str(db), "--continue", "aa")

    assert message.startswith("The id 'aa' matches several runs (") and message.endswith("); give more of it.")
    assert len(fake_server.requests) == before


def test_a_run_with_no_final_answer_cannot_be_continued(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    panel_file = on_fake_server("vote", fake_server, tmp_path)
    db = tmp_path / "runs.db"
    first = cli_json("vote", str(panel_file), "--db", str(db))
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        con.execute("UPDATE runs SET status = 'no_answer', final_answer_text = NULL WHERE id = ?", (first["run_id"],))
    before = len(fake_server.requests)

    message = refusal("vote", str(panel_file), "--db", str(db), "--continue", first["run_id"])

    assert message == (
        f"Run {first['run_id'][:8]} reached no final answer (no_answer), so there is nothing to follow up;"
        " continue a run that reached one."
    )
    assert len(fake_server.requests) == before


def test_resuming_a_follow_up_keeps_its_earlier_turn_and_reuses_every_call(
    fake_server: FakeOpenAIServer, tmp_path: Path
) -> None:
    """Its turns are read again from the store, so every request hashes as before: no request at all."""
    panel_file = on_fake_server("council", fake_server, tmp_path)
    db = tmp_path / "runs.db"
    first = cli_json("council", str(panel_file), "--db", str(db), "-q", "Should we split the monolith?")
    follow = cli_json(
        "council", str(panel_file), "--db", str(db), "-q", "Which service goes first?", "--continue", first["run_id"]
    )
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        con.execute("UPDATE runs SET status = 'interrupted' WHERE id = ?", (follow["run_id"],))
    before = len(fake_server.requests)

    resumed = resume(db, follow["run_id"])

    assert len(fake_server.requests) == before
    assert resumed["calls"] == follow["calls"] and resumed["final_answer"] == follow["final_answer"]
    assert resumed["parent_id"] == first["run_id"]
    with TranscriptReader.open(db) as reader:
        config = reader.get_run(resumed["run_id"]).config
    assert (config["parent_id"], config["resumed_from"]) == (first["run_id"], follow["run_id"])


def test_a_follow_up_whose_parent_was_deleted_is_not_resumed(fake_server: FakeOpenAIServer, tmp_path: Path) -> None:
    panel_file = on_fake_server("vote", fake_server, tmp_path)
    db = tmp_path / "runs.db"
    first = cli_json("vote", str(panel_file), "--db", str(db))
    follow = cli_json("vote", str(panel_file), "--db", str(db), "--continue", first["run_id"])
    with contextlib.closing(sqlite3.connect(db)) as con, con:
        con.execute("UPDATE runs SET status = 'interrupted' WHERE id = ?", (follow["run_id"],))
    delete_run(db, first["run_id"])

    message = refusal("resume", follow["run_id"], "--db", str(db))

    assert message == (
        f"Run {follow['run_id'][:8]} cannot be resumed: the run it follows up ({first['run_id']}) is no longer in the store;"
        " ask the follow-up again with --continue."
    )
    shown = cli("history", "show", follow["run_id"], "--db", str(db))
    assert f"follows up {first['run_id']}, no longer stored" in shown.stdout


def test_a_thread_longer_than_max_turns_keeps_the_nearest_runs(
    fake_server: FakeOpenAIServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(followup, "MAX_TURNS", 1)
    panel_file = on_fake_server("vote", fake_server, tmp_path)
    db = str(tmp_path / "runs.db")
    first = cli_json("vote", str(panel_file), "--db", db, "-q", "Tabs or spaces?")
    second = cli_json("vote", str(panel_file), "--db", db, "-q", "Vim or Emacs?", "--continue", first["run_id"])
    before = len(fake_server.requests)

    cli_json("vote", str(panel_file), "--db", db, "-q", "Light or dark theme?", "--continue", second["run_id"])

    for request in fake_server.requests[before:]:
        messages = conversation(request)
        assert messages[:2] == turns(second) and messages[2]["role"] == "user"


def test_the_thread_is_capped_nearest_runs_first() -> None:
    """At most MAX_TURNS runs and MAX_THREAD_CHARS characters, the nearest kept; the run
    continued is kept however long it is."""

    def run(number: int, size: int = 10) -> RunRecord:
        return RunRecord(
            id=f"r{number}",
            protocol="confer",
            panel="p",
            question=f"q{number}",
            status="finished",
            started_at=float(number),
            members=[],
            config={},
            final_answer=f"a{number}".ljust(size, "."),
        )

    assert prior_turns([run(1), run(2)]) == (
        {"role": "user", "content": "q1"},
        {"role": "assistant", "content": "a1........"},
        {"role": "user", "content": "q2"},
        {"role": "assistant", "content": "a2........"},
    )
    long_answer = MAX_THREAD_CHARS - 100
    kept = prior_turns([run(1, 200), run(2, long_answer), run(3)])
    assert [turn["content"] for turn in kept[::2]] == ["q2", "q3"]
    assert [turn["content"] for turn in prior_turns([run(1), run(2, MAX_THREAD_CHARS * 2)])[::2]] == ["q2"]
