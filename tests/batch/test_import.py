"""`panel history import OTHER.db`: runs of another file are copied whole, ids kept, runs
already here skipped, texts stored once, and each copied run reads back exactly as it did."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import sqlite3
from pathlib import Path

import pytest

from panel_cli.errors import UserError
from panel_cli.store.connection import connect
from panel_cli.store.maintenance import record_retally
from panel_cli.store.merge import RUN_TABLES, import_runs
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.records import RetallyRecord
from panel_cli.store.texts import collect_garbage
from tests.helpers import cli
from tests.store.protocol_runs import ENGINES, stored_run
from tests.store.sample_runs import confer_run, record, run_started

SHARED_QUESTION = "Which queue should the billing service use?"


def everything(path: Path, run_id: str) -> tuple:
    with TranscriptReader.open(path) as reader:
        return reader.get_run(run_id), reader.run_events(run_id), reader.run_calls(run_id), reader.run_retallies(run_id)


@pytest.fixture
def source(tmp_path: Path) -> Path:
    """A run of every protocol, a recount, one run also in the target, and one still running here."""
    path = tmp_path / "other.db"

    async def fill() -> None:
        for protocol in ENGINES:
            await stored_run(path, f"other-{protocol}", protocol, SHARED_QUESTION if protocol == "confer" else None)
        await stored_run(path, "in-both", "council")
        await record(path, "live", [run_started()])  # written by this process, which is alive: running

    asyncio.run(fill())
    record_retally(
        path,
        RetallyRecord(
            id="recount1", run_id="other-vote", method="majority", quorum=1, result={"winner": "x"}, created_at=1.0
        ),
    )
    return path


@pytest.fixture
def target(tmp_path: Path) -> Path:
    path = tmp_path / "main.db"

    async def fill() -> None:
        await stored_run(path, "mine", "confer", SHARED_QUESTION)
        await stored_run(path, "in-both", "ensemble")
        await record(path, "old", confer_run("old"))

    asyncio.run(fill())
    return path


def test_import_copies_every_run_whole_and_exactly(source, target):
    before = {run_id: everything(target, run_id) for run_id in ("mine", "in-both", "old")}
    report = import_runs(target, source)

    copied = [f"other-{protocol}" for protocol in ENGINES]
    assert sorted(report.imported) == sorted(copied)
    assert report.skipped == ["in-both"] and report.running == ["live"]
    for run_id in copied:
        there, here = everything(source, run_id), everything(target, run_id)
        assert here[0].imported_from == str(source.resolve()), "an imported run names the file it came from"
        assert (dataclasses.replace(here[0], imported_from=None), *here[1:]) == there, run_id
    assert everything(target, "other-vote")[3][0].id == "recount1"
    for run_id, stored in before.items():
        assert everything(target, run_id) == stored, "a run already there is left as it was"
    with TranscriptReader.open(target) as reader:
        assert reader.count_runs() == 3 + len(copied)
        assert {run.id for run in reader.list_runs(search="billing queue")} == {"mine", "other-confer"}
        assert [decision.run_id for decision in reader.list_decisions()] == ["other-decide"]


def test_texts_both_files_hold_are_stored_once_and_none_is_left_over(source, target):
    import_runs(target, source)
    db = connect(target)
    try:
        assert (
            db.execute("SELECT count(*) FROM texts").fetchone()[0]
            == db.execute("SELECT count(DISTINCT hash) FROM texts").fetchone()[0]
        )
        question_ids = db.execute(
            "SELECT DISTINCT question_text FROM runs WHERE id IN ('mine', 'other-confer')"
        ).fetchall()
        assert len(question_ids) == 1, "the question both files asked is one text"
        db.execute("BEGIN IMMEDIATE")
        assert collect_garbage(db) == 0, "only texts the copied runs refer to were copied"
        db.execute("ROLLBACK")
    finally:
        db.close()


def test_importing_the_same_file_again_changes_nothing(source, target):
    first = import_runs(target, source)
    size = sqlite3.connect(target).execute("SELECT count(*) FROM texts").fetchone()[0]
    again = import_runs(target, source)
    assert again.imported == [] and sorted(again.skipped) == sorted([*first.imported, *first.skipped])
    assert again.texts == 0 and sqlite3.connect(target).execute("SELECT count(*) FROM texts").fetchone()[0] == size


def test_every_table_holding_runs_is_copied(tmp_path):
    """A table added later with a `run_id` column must join RUN_TABLES, or import would drop its rows."""
    db = connect(tmp_path / "schema.db")
    try:
        tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        holding = {
            table
            for table in tables
            if any(column[1] == "run_id" for column in db.execute(f"PRAGMA table_info({table})"))
        }
    finally:
        db.close()
    assert holding | {"runs"} == {table.name for table in RUN_TABLES}


def test_history_import_says_what_it_did(source, target):
    outcome = cli("history", "import", str(source), "--db", str(target), columns=None)
    assert outcome.exit_code == 0, outcome.output
    assert outcome.stdout.replace("\n", "") == (
        f"Imported {len(ENGINES)} runs from {source} into {target}; skipped 1 run already there;"
        " left 1 run still running on this host (import again once it ends)."
    )
    outcome = cli("history", "import", str(source), "--db", str(target), "--json", columns=None)
    data = json.loads(outcome.stdout)
    assert data["imported"] == [] and len(data["skipped"]) == len(ENGINES) + 1 and data["running"] == ["live"]


def test_a_missing_file_or_the_file_itself_is_refused(tmp_path, target):
    with pytest.raises(
        UserError, match=r"^.*/none\.db does not exist; give the transcript database to import runs from\.$"
    ):
        import_runs(target, tmp_path / "none.db")
    with pytest.raises(UserError, match=r"is the database runs are imported into; give another file to import from\.$"):
        import_runs(target, target)
    (tmp_path / "junk.db").write_text("not a database at all, just text " * 100)
    outcome = cli("history", "import", str(tmp_path / "junk.db"), "--db", str(target), columns=None)
    assert isinstance(outcome.exception, UserError)
    assert (
        outcome.exception.message
        == f"{tmp_path / 'junk.db'} is not a panel transcript database (it is not an SQLite file)."
    )
