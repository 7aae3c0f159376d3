"""Hostile transcript files and hostile numbers at `panel history`: import refuses a file
holding a row no run can hold, naming it, and leaves the target as it was; every reader
survives a row damaged some other way (shown as damaged, exportable, deletable); numbers past
any sensible bound are one sentence and exit 2, never an OverflowError or a wait for ever.

In-process (CliRunner): a `UserError` is what `main` turns into its sentence and exit code 2.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from panel_cli.store.reader import TranscriptReader
from tests.helpers import cli, cli_ok, cli_refused
from tests.store.sample_runs import ENDINGS, answer_calls, confer_run, record, run_started


def two_runs(path: Path) -> Path:
    """A good run and one to damage, which share no text."""
    asyncio.run(
        record(
            path, "good-run-1", [run_started("Another question?"), *answer_calls("good-run-1")[:1], ENDINGS["finished"]]
        )
    )
    asyncio.run(record(path, "bad-run-2", confer_run("bad-run-2")))
    return path


def change(path: Path, sql: str, *params: object) -> None:
    with sqlite3.connect(path) as db:
        db.execute(sql, params)
    db.close()


def composed_text(path: Path) -> int:
    """Make the question of bad-run-2 a composed text whose one part is itself."""
    with sqlite3.connect(path) as db:
        (text_id,) = db.execute("SELECT question_text FROM runs WHERE id = 'bad-run-2'").fetchone()
        db.execute("UPDATE texts SET body = NULL, parts = ? WHERE id = ?", (json.dumps([[text_id]]), text_id))
    db.close()
    return int(text_id)


DAMAGE = {
    "a garbage started_at": ("UPDATE runs SET started_at = 'yesterday-ish' WHERE id = 'bad-run-2'",),
    "a number as started_at": ("UPDATE runs SET started_at = 12 WHERE id = 'bad-run-2'",),
    "a status no run has": ("UPDATE runs SET status = 'exploded' WHERE id = 'bad-run-2'",),
    "text as the call count": ("UPDATE runs SET calls = 'many', cost = 'free' WHERE id = 'bad-run-2'",),
    "bad JSON in the result": ("UPDATE runs SET result_json = '{\"winner\": ' WHERE id = 'bad-run-2'",),
    "JSON nested 5,000 deep in the result": (
        "UPDATE runs SET result_json = ? WHERE id = 'bad-run-2'",
        "[" * 5000 + "]" * 5000,
    ),
    "bad JSON in a payload": (
        "UPDATE events SET payload_json = '{nope' WHERE run_id = 'bad-run-2' AND seq = (SELECT min(seq) FROM events"
        " WHERE run_id = 'bad-run-2' AND payload_json IS NOT NULL)",
    ),
    "bad JSON in a request": ("UPDATE calls SET request_json = '[{' WHERE run_id = 'bad-run-2'",),
    "a missing answer text": ("UPDATE runs SET final_answer_text = 999999 WHERE id = 'bad-run-2'",),
}


@pytest.mark.parametrize("damage", DAMAGE)
def test_import_refuses_a_file_with_a_hostile_row_and_names_it(tmp_path: Path, damage: str) -> None:
    other = two_runs(tmp_path / "other.db")
    change(other, *DAMAGE[damage])
    target = tmp_path / "main.db"
    asyncio.run(record(target, "mine", confer_run("mine")))
    before = target.read_bytes()
    said = cli_refused("history", "import", str(other), "--db", str(target))
    assert said.startswith(f"{other} cannot be imported: run 'bad-run-2', ")
    assert said.endswith("; nothing was imported.")
    assert target.read_bytes() == before
    with TranscriptReader.open(target) as reader:
        assert [run.id for run in reader.list_runs()] == ["mine"]


def test_import_names_what_a_garbage_time_should_have_been(tmp_path: Path) -> None:
    other = two_runs(tmp_path / "other.db")
    change(other, *DAMAGE["a garbage started_at"])
    said = cli_refused("history", "import", str(other), "--db", str(tmp_path / "main.db"))
    assert "runs.started_at holds 'yesterday-ish', not a time (2025-01-31T09:30:00.000000000Z)" in said


def test_import_from_a_device_names_the_file_to_import(tmp_path: Path) -> None:
    said = cli_refused("history", "import", "/dev/null", "--db", str(tmp_path / "main.db"))
    assert said == (
        "/dev/null is not a regular file (a pipe, a device or a socket); "
        "give the transcript database to import runs from."
    )
    assert not (tmp_path / "main.db").exists()


def test_import_refuses_a_text_made_of_itself_without_recursing(tmp_path: Path) -> None:
    other = two_runs(tmp_path / "other.db")
    text_id = composed_text(other)
    said = cli_refused("history", "import", str(other), "--db", str(tmp_path / "main.db"))
    assert f"text {text_id} is made of itself" in said
    assert not (tmp_path / "main.db").exists() or TranscriptReader.open(tmp_path / "main.db").list_runs() == []


@pytest.fixture(params=[*DAMAGE, "a text made of itself"])
def damaged(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Path, str]:
    """A file holding one good run and one damaged some way import would refuse."""
    path = two_runs(tmp_path / "damaged.db")
    if request.param == "a text made of itself":
        composed_text(path)
    else:
        change(path, *DAMAGE[request.param])
    return path, request.param


def test_every_reader_survives_a_damaged_row(damaged: tuple[Path, str], tmp_path: Path) -> None:
    path, damage = damaged
    db = ["--db", str(path)]
    listed = cli_ok("history", "list", *db)
    assert "good-run" in listed and "bad-run-" in listed
    rows = {run["run_id"]: run for run in json.loads(cli_ok("history", "list", "--json", *db))}
    assert rows["good-run-1"]["status"] == "finished" and rows["good-run-1"]["damage"] is None
    shown = cli_ok("history", "show", "bad-run-2", *db)
    assert shown.startswith("Run       bad-run-2")
    detail = json.loads(cli_ok("history", "show", "bad-run-2", "--json", *db))
    if damage != "bad JSON in a request":  # a call's row: the call reads with no messages
        assert detail["damage"] is not None, damage
        assert f"Damage    {detail['damage']}" in shown
    for export_format in ("md", "json", "html"):
        exported = tmp_path / f"bad.{export_format}"
        cli_ok("history", "export", "bad-run-2", "-o", str(exported), *db)
        assert exported.stat().st_size > 0
    cli_ok("history", "stats", *db)
    cli_ok("history", "replay", "bad-run-2", "--speed", "max", *db)
    cli_ok("history", "delete", "bad-run-2", "--yes", *db)
    assert [run["run_id"] for run in json.loads(cli_ok("history", "list", "--json", *db))] == ["good-run-1"]


def test_a_run_whose_row_is_unreadable_is_listed_as_damaged(tmp_path: Path) -> None:
    path = two_runs(tmp_path / "damaged.db")
    change(path, *DAMAGE["a garbage started_at"])
    runs = {run["run_id"]: run for run in json.loads(cli_ok("history", "list", "--json", "--db", str(path)))}
    assert runs["bad-run-2"]["status"] == "damaged"
    assert runs["bad-run-2"]["damage"] == "unreadable started_at"
    damaged_only = json.loads(cli_ok("history", "list", "--status", "damaged", "--json", "--db", str(path)))
    assert [run["run_id"] for run in damaged_only] == ["bad-run-2"]
    line = next(line for line in cli_ok("history", "list", "--db", str(path)).splitlines() if "bad-run-" in line)
    assert " damaged " in line and " — " in line, "no time to show"


# -- numbers past any bound ------------------------------------------------------------------


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return two_runs(tmp_path / "runs.db")


@pytest.mark.parametrize("command", ["list", "decisions"])
@pytest.mark.parametrize("limit", ["100000000000000000000", "1e20", "1000001", "0"])
def test_a_limit_out_of_bounds_is_a_usage_error(db: Path, command: str, limit: str) -> None:
    result = cli("history", command, "--limit", limit, "--db", str(db))
    assert result.exit_code == 2, result.output
    assert "--limit" in result.output and "Traceback" not in result.output


@pytest.mark.parametrize("quorum", ["100000000000000000000", "1e20", "10001", "0"])
def test_a_retally_quorum_out_of_bounds_is_a_usage_error(db: Path, quorum: str) -> None:
    result = cli("history", "retally", "bad-run-2", "--quorum", quorum, "--db", str(db))
    assert result.exit_code == 2, result.output
    assert "--quorum" in result.output


@pytest.mark.parametrize("threshold", ["nan", "inf", "1e308", "1", "0", "-0.5"])
def test_a_retally_threshold_that_is_no_share_is_one_sentence(db: Path, threshold: str) -> None:
    said = cli_refused("history", "retally", "bad-run-2", "--threshold", threshold, "--db", str(db))
    assert said.startswith(
        f"--threshold: a share above 0 and below 1, such as 0.75 (more than 75% of the votes), not {float(threshold):g}"
    )


@pytest.mark.parametrize("speed", ["1e-300", "0.001", "-1", "nan"])
def test_a_replay_that_would_wait_for_ever_is_refused(db: Path, speed: str) -> None:
    said = cli_refused("history", "replay", "good-run-1", "--speed", speed, "--db", str(db))
    assert said.startswith("--speed takes a number of times faster than the run from 0.01 up")


def test_export_of_a_run_with_a_huge_id_names_its_file_from_a_short_clean_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "runs.db"
    huge = "a/" + "x" * 5000
    asyncio.run(record(path, huge, confer_run(huge)))
    monkeypatch.chdir(tmp_path)
    result = cli("history", "export", "a/xxx", "--format", "html", "--db", str(path))
    assert result.exit_code == 0, result.output
    named = tmp_path / f"panel-a{'x' * 39}.html"
    assert named.read_text(encoding="utf-8").startswith("<!doctype html>")
    assert result.stderr == f"Wrote {named.name} (no -o given, so named after the run).\n"
    shutil.rmtree(tmp_path / "a", ignore_errors=True)


# Files that are not what they claim: each is refused with one sentence naming that file, before
# anything is read from its rows or written to the target.
def _runs_as_a_view(path: Path, select: str) -> None:
    with sqlite3.connect(path) as db:
        db.execute("ALTER TABLE runs RENAME TO stored_runs")
        db.execute(f"CREATE VIEW runs AS {select}")
    db.close()


LIES = {
    "a version its tables are not": (
        lambda path: change(path, "ALTER TABLE runs DROP COLUMN host"),
        "its table runs lacks the column host",
    ),
    "a runs view adding a duplicate row": (
        lambda path: _runs_as_a_view(path, "SELECT * FROM stored_runs UNION ALL SELECT * FROM stored_runs"),
        "its runs is a view, not a table",
    ),
    "a view over millions of rows": (
        lambda path: _runs_as_a_view(
            path,
            "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n LIMIT 5000000) "
            "SELECT s.* FROM n, stored_runs s",
        ),
        "its runs is a view, not a table",
    ),
    "no texts at all": (lambda path: change(path, "DROP TABLE texts"), "it has no table texts"),
}


@pytest.mark.parametrize("lie", LIES)
def test_import_refuses_a_file_that_is_not_what_it_claims_and_names_it(tmp_path: Path, lie: str) -> None:
    other = two_runs(tmp_path / "other.db")
    damage, words = LIES[lie]
    damage(other)
    target = tmp_path / "main.db"
    asyncio.run(record(target, "mine", confer_run("mine")))
    before = target.read_bytes()
    said = cli_refused("history", "import", str(other), "--db", str(target))
    assert said == f"{other} cannot be imported: {words}; nothing was imported."
    assert target.read_bytes() == before


def test_a_damaged_file_is_named_as_the_one_damaged(tmp_path: Path) -> None:
    other = two_runs(tmp_path / "other.db")
    with sqlite3.connect(other) as db:
        db.execute("PRAGMA writable_schema = ON")
        db.execute("UPDATE sqlite_master SET rootpage = 9999 WHERE name = 'runs_started_at'")
    db.close()
    target = tmp_path / "main.db"
    said = cli_refused("history", "import", str(other), "--db", str(target))
    assert said.startswith(f"{other} cannot be imported: ") and str(target) not in said
