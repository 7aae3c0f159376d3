"""Runs another file brought in. `panel history import` copies a shard's runs, and with them
their panels: the commands those start and the hosts they send keys to. Nobody here read that
panel, so resuming such a run shows what it will start and where keys go, and asks (or needs
`--yes`); `last` never means a run stamped in the future; `batch --resume` asks such a run's
question afresh on the batch's own panel rather than continuing it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from tests.helpers import ROOT, cli, cli_refused

SERVER = ROOT / "tests" / "fakes" / "mcp_server.py"
FUTURE = "2999-01-01T00:00:00.000000000Z"


def hostile_shard(tmp_path: Path, *, started_at: str | None = None) -> tuple[Path, Path, str]:
    """A shard holding one interrupted run whose panel starts a tool server (which writes its
    pid to a file as it starts: the sign that it ran). Its file, the pid file, the run's id."""
    shard = tmp_path / "shard"
    shard.mkdir()
    pidfile = tmp_path / "started.pid"
    panel = shard / "p.yaml"
    panel.write_text(
        f"name: shard\nprotocol: ensemble\nquestion: q?\ntools:\n  notes:\n    command: [python, {SERVER}]\n"
        f"    env: {{MCP_FIXTURE_PIDFILE: {pidfile}}}\n"
        "attach: [brief.md]\n"
        "members:\n  - {name: a, model: demo/sage, tools: [notes]}\n  - {name: b, model: demo/skeptic}\n"
    )
    (shard / "brief.md").write_text("The brief.\n")
    db = shard / "shard.db"
    made = cli("ensemble", str(panel), "--json", "--db", str(db))
    assert made.exit_code == 0, made.output
    run_id = json.loads(made.stdout)["run_id"]
    assert pidfile.exists()
    pidfile.unlink()
    with sqlite3.connect(db) as stored:
        stored.execute("UPDATE runs SET status = 'interrupted' WHERE id = ?", (run_id,))
        if started_at is not None:
            stored.execute("UPDATE runs SET started_at = ? WHERE id = ?", (started_at, run_id))
    return db, pidfile, run_id


def imported(tmp_path: Path, shard: Path) -> Path:
    target = tmp_path / "mine.db"
    outcome = cli("history", "import", str(shard), "--db", str(target))
    assert outcome.exit_code == 0, outcome.output
    return target


@pytest.mark.subprocess
def test_resuming_an_imported_run_shows_what_it_starts_and_asks(tmp_path):
    shard, pidfile, run_id = hostile_shard(tmp_path)
    target = imported(tmp_path, shard)

    refused = cli("resume", run_id, "--db", str(target), input="n\n")

    assert refused.exit_code == 1, refused.output
    assert f"came from {shard.resolve()}" in refused.stderr
    assert (
        f"starts python {SERVER} in {shard.parent} with MCP_FIXTURE_PIDFILE={pidfile} (tools.notes)" in refused.stderr
    )
    assert f"sends the file {shard.parent / 'brief.md'} to every member" in refused.stderr
    assert "Nothing resumed." in refused.stderr
    assert not pidfile.exists(), "the shard's tool server was started"
    with sqlite3.connect(target) as stored:
        assert stored.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone() == ("interrupted",)


@pytest.mark.subprocess
def test_without_input_an_imported_run_is_not_resumed(tmp_path):
    shard, pidfile, run_id = hostile_shard(tmp_path)
    target = imported(tmp_path, shard)
    outcome = cli("resume", run_id, "--db", str(target), "--json")
    assert outcome.exit_code == 1 and not pidfile.exists()
    assert outcome.stdout.strip() == "", "no result on stdout"


@pytest.mark.subprocess
def test_yes_resumes_an_imported_run(tmp_path):
    shard, pidfile, run_id = hostile_shard(tmp_path)
    target = imported(tmp_path, shard)
    outcome = cli("resume", run_id, "--db", str(target), "--yes", "--json")
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(outcome.stdout)["final_answer"]
    assert pidfile.exists()


@pytest.mark.subprocess
def test_a_resume_of_a_resumed_imported_run_asks_too(tmp_path):
    """The panel came from the import whoever resumed it since: the chain is followed."""
    shard, pidfile, run_id = hostile_shard(tmp_path)
    target = imported(tmp_path, shard)
    first = cli("resume", run_id, "--db", str(target), "--yes", "--json")
    assert first.exit_code == 0, first.output
    second_id = json.loads(first.stdout)["run_id"]
    pidfile.unlink()
    with sqlite3.connect(target) as stored:
        stored.execute("UPDATE runs SET status = 'interrupted' WHERE id = ?", (second_id,))
    again = cli("resume", second_id, "--db", str(target), input="n\n")
    assert again.exit_code == 1 and "came from" in again.stderr and not pidfile.exists()


@pytest.mark.subprocess
def test_last_ignores_a_run_stamped_in_the_future(tmp_path):
    shard, pidfile, run_id = hostile_shard(tmp_path, started_at=FUTURE)
    target = tmp_path / "mine.db"
    mine = tmp_path / "mine.yaml"
    mine.write_text("name: mine\nquestion: q?\nmembers:\n  - {name: a, model: demo/sage}\n")
    own = cli("ensemble", str(mine), "--json", "--db", str(target))
    assert own.exit_code == 0, own.output
    imported(tmp_path, shard)

    shown = cli("history", "show", "last", "--json", "--db", str(target))
    assert json.loads(shown.stdout)["run_id"] == json.loads(own.stdout)["run_id"]
    assert "already finished" in cli_refused("resume", "last", "--db", str(target), "--yes")
    assert not pidfile.exists()


@pytest.mark.subprocess
def test_a_file_of_future_runs_alone_has_no_last_one(tmp_path):
    shard, _, _ = hostile_shard(tmp_path, started_at=FUTURE)
    target = imported(tmp_path, shard)
    refused = cli_refused("resume", "last", "--db", str(target), "--yes")
    assert refused == f"There is no run in {target} started before now, so no last one."


@pytest.mark.subprocess
def test_batch_resume_asks_an_imported_runs_question_afresh_on_its_own_panel(tmp_path):
    shard_db, pidfile, _ = hostile_shard(tmp_path)
    questions = tmp_path / "q.txt"
    questions.write_text("q?\n")
    output = str(tmp_path / "results.jsonl")
    batch = cli(
        "batch",
        str(shard_db.parent / "p.yaml"),
        "--questions",
        str(questions),
        "--db",
        str(shard_db),
        "-o",
        output,
        "--json",
    )
    assert batch.exit_code == 0, batch.output
    batch_id = json.loads(batch.stdout)["batch_id"]
    pidfile.unlink()
    with sqlite3.connect(shard_db) as stored:
        stored.execute("UPDATE runs SET status = 'interrupted' WHERE batch_id = ?", (batch_id,))
        (run_id,) = stored.execute("SELECT id FROM runs WHERE batch_id = ?", (batch_id,)).fetchone()
    target = imported(tmp_path, shard_db)
    mine = tmp_path / "mine.yaml"
    mine.write_text("name: mine\nprotocol: ensemble\nmembers:\n  - {name: a, model: demo/sage}\n")

    outcome = cli(
        "batch", str(mine), "--questions", str(questions), "--resume", batch_id, "--db", str(target), "-o", output
    )

    assert outcome.exit_code == 0, outcome.output
    assert not pidfile.exists(), "the shard's tool server was started"
    with sqlite3.connect(target) as stored:
        assert stored.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone() == ("interrupted",)
