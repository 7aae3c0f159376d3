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
