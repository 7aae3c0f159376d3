from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from panel_cli.errors import UserError
from panel_cli.store.db import TranscriptReader, TranscriptStore, connect, default_db_path, resolve_db_path
from panel_cli.store.migrations import MIGRATIONS


def tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


async def test_open_creates_the_file_and_its_folders(tmp_path: Path) -> None:
    path = tmp_path / "nested" / "dir" / "panel.db"
    store = await TranscriptStore.open(path)
    await store.close()
    assert tables(path) >= {"runs", "events", "calls"}
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


async def test_reopening_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    for _ in range(3):
        store = await TranscriptStore.open(path)
        await store.close()
    connect(path).close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)


def test_calls_are_indexed_by_run(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    connect(path).close()
    with sqlite3.connect(path) as db:
        plan = db.execute("EXPLAIN QUERY PLAN SELECT * FROM calls WHERE run_id = 'x'").fetchall()
    assert "calls_run_id" in str(plan)


def test_a_file_from_a_newer_panel_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    connect(path).close()
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    with pytest.raises(UserError, match="newer version of panel"):
        connect(path)


async def test_a_file_that_is_not_sqlite_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are my notes, not a database\n" * 100)
    with pytest.raises(UserError, match="not an SQLite file"):
        await TranscriptStore.open(path)
    with pytest.raises(UserError, match="not an SQLite file"):
        TranscriptReader.open(path)


def test_reading_a_missing_file_does_not_create_it(tmp_path: Path) -> None:
    path = tmp_path / "typo.db"
    with TranscriptReader.open(path) as reader:
        assert reader.list_runs() == []
    assert not path.exists()


def test_db_path_resolution(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PANEL_DB", raising=False)
    assert default_db_path().name == "panel.db"
    assert "panel" in default_db_path().parent.parts
    monkeypatch.setenv("PANEL_DB", str(tmp_path / "env.db"))
    assert resolve_db_path(None) == tmp_path / "env.db"
    assert resolve_db_path(tmp_path / "flag.db") == tmp_path / "flag.db"


def version_1_file(path: Path) -> None:
    """A file as panel wrote it before migration 2, with one run and one call."""
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute("PRAGMA journal_mode = WAL")
        MIGRATIONS[0](db)
        db.execute("PRAGMA user_version = 1")
        db.execute(
            "INSERT INTO runs (id, protocol, panel, question, config_json, status, started_at, finished_at, calls)"
            " VALUES ('old', 'confer', 'p', 'Which?', '{}', 'finished', 1.0, 2.0, 1)"
        )
        db.execute(
            "INSERT INTO events (run_id, seq, ts, type, payload_json) VALUES ('old', 1, 1.0, 'run_started', ?)",
            ('{"members": [{"name": "gpt", "model": "openai/gpt-4o"}]}',),
        )
        db.execute(
            "INSERT INTO calls (id, run_id, member, model, stage, round, request_json, response, latency, attempts, ts)"
            " VALUES ('c1', 'old', 'gpt', 'openai/gpt-4o', 'answer', 0, '[]', 'Yes.', 1.0, 1, 1.5)"
        )
    db.close()


def columns(path: Path, table: str) -> list[str]:
    with sqlite3.connect(path) as db:
        return [row[1] for row in db.execute(f"PRAGMA table_info({table})")]


async def test_the_writer_brings_a_version_1_file_forward(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    version_1_file(path)
    assert "detail" not in columns(path, "calls")
    store = await TranscriptStore.open(path)
    await store.close()
    assert columns(path, "calls")[-2:] == ["detail", "truncated"]
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
    with TranscriptReader.open(path) as reader:
        (call,) = reader.run_calls("old")
    assert (call.response, call.truncated, call.detail) == ("Yes.", False, None)


def test_the_reader_reads_an_older_file_as_it_is(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    version_1_file(path)
    with TranscriptReader.open(path) as reader:
        assert [run.id for run in reader.list_runs()] == ["old"]
        assert [member.name for member in reader.get_run("old").members] == ["gpt"]
        (call,) = reader.run_calls("old")
    assert (call.truncated, call.detail) == (False, None)
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1  # reading never migrates
    assert "detail" not in columns(path, "calls")


def test_an_older_file_the_reader_cannot_read_says_how_to_upgrade_it(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    version_1_file(path)
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE calls")
    with TranscriptReader.open(path) as reader:
        assert reader.get_run("old").id == "old"
        with pytest.raises(UserError) as caught:
            reader.run_calls("old")
    assert caught.value.message == (
        f"{path} was written by an older panel (schema version 1) and cannot be read as it is; run any protocol"
        f" command with it (for example `panel confer FILE --db {path}`) to upgrade it."
    )


def test_a_blank_file_reads_as_an_empty_store(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    path.touch()
    with TranscriptReader.open(path) as reader:
        assert reader.list_runs() == [] and reader.count_runs() == 0
    assert path.stat().st_size == 0


def test_another_sqlite_file_is_not_a_transcript(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    with sqlite3.connect(path) as db:
        db.execute("CREATE TABLE notes (text TEXT)")
    db.close()
    with pytest.raises(UserError, match=r"is an SQLite file but not a panel transcript database\.$"):
        TranscriptReader.open(path)
