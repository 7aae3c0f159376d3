from __future__ import annotations

import contextlib
import gzip
import json
import shutil
import sqlite3
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from panel_cli.errors import UserError
from panel_cli.events import EventBus
from panel_cli.store.connection import PAGE_SIZE, connect
from panel_cli.store.migrations import MIGRATIONS
from panel_cli.store.paths import default_db_path, resolve_db_path
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.subscriber import TranscriptStore
from tests.store.sample_runs import run_started


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


def test_a_runs_events_and_calls_are_found_by_its_id(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    connect(path).close()
    with sqlite3.connect(path) as db:
        for table in ("events", "calls"):
            (plan,) = db.execute(f"EXPLAIN QUERY PLAN SELECT * FROM {table} WHERE run_id = 'x'").fetchall()
            assert plan[3] == f"SEARCH {table} USING PRIMARY KEY (run_id=?)"


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
    assert {"detail", "truncated", "request_hash"} <= set(columns(path, "calls"))
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


def test_an_older_file_that_cannot_be_brought_forward_is_one_sentence(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    version_1_file(path)
    with sqlite3.connect(path) as db:
        db.execute("DROP TABLE calls")
    db.close()
    with pytest.raises(UserError) as caught:
        TranscriptReader.open(path)
    assert caught.value.message == (
        f"{path} was written by an older panel (schema version 1) and cannot be brought forward: no such table: calls."
    )
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1  # and the file is as it was


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


def version_2_file(path: Path) -> None:
    """A file as panel wrote it at schema version 2: a finished run, a truncated call and a
    failed one with the provider's raw detail."""
    with sqlite3.connect(path, isolation_level=None) as db:
        db.execute("PRAGMA journal_mode = WAL")
        for migration in MIGRATIONS[:2]:
            migration(db)
        db.execute("PRAGMA user_version = 2")
        db.execute(
            "INSERT INTO runs (id, protocol, panel, question, config_json, status, started_at, finished_at, final_answer,"
            " result_json, calls, tokens, cost) VALUES ('v2', 'confer', 'p', 'Which database?', '{\"max_rounds\": 1}',"
            " 'finished', 1700000000.25, 1700000009.5, 'PostgreSQL.', '{\"winner\": \"gpt\"}', 2, 30, 0.5)"
        )
        events = [
            {
                "run_id": "v2",
                "seq": 1,
                "ts": 1700000000.25,
                "type": "run_started",
                "protocol": "confer",
                "panel": "p",
                "question": "Which database?",
                "members": [{"name": "gpt", "model": "openai/gpt-4o", "label": None}],
                "config": {"max_rounds": 1},
            },
            {
                "run_id": "v2",
                "seq": 2,
                "ts": 1700000009.5,
                "type": "run_finished",
                "final_answer": "PostgreSQL.",
                "reached_answer": True,
                "result": {"winner": "gpt"},
            },
        ]
        for event in events:
            db.execute(
                "INSERT INTO events (run_id, seq, ts, type, payload_json) VALUES (?, ?, ?, ?, ?)",
                (event["run_id"], event["seq"], event["ts"], event["type"], json.dumps(event)),
            )
        db.execute(
            "INSERT INTO calls (id, run_id, member, model, stage, round, request_json, response, tokens_in, tokens_out,"
            " cost, latency, attempts, ts, truncated) VALUES ('c1', 'v2', 'gpt', 'openai/gpt-4o', 'answer', 0,"
            ' \'[{"role": "user", "content": "Which database?"}]\', \'PostgreSQL, because\', 10, 20, 0.5, 1.5, 1,'
            " 1700000001.75, 1)"
        )
        db.execute(
            "INSERT INTO calls (id, run_id, member, model, stage, round, request_json, latency, error_kind, error,"
            " detail, attempts, ts) VALUES ('c2', 'v2', 'claude', 'anthropic/claude', 'answer', 0, '[]', 2.0, 'timeout',"
            " 'timed out', '{\"raw\": true}', 3, 1700000002.0)"
        )
    db.close()


@pytest.mark.parametrize("bring_forward", ["reader", "writer"])
async def test_a_version_2_file_reads_as_it_was_written(tmp_path: Path, bring_forward: str) -> None:
    path = tmp_path / "panel.db"
    version_2_file(path)
    if bring_forward == "writer":
        store = await TranscriptStore.open(path)
        await store.close()
    with TranscriptReader.open(path) as reader:
        run = reader.get_run("v2")
        events = reader.run_events("v2")
        truncated, failed = reader.run_calls("v2")
    assert (run.question, run.final_answer, run.result, run.outcome) == (
        "Which database?",
        "PostgreSQL.",
        {"winner": "gpt"},
        "gpt",
    )
    assert (run.started_at, run.finished_at, run.calls, run.tokens, run.cost) == (
        1700000000.25,
        1700000009.5,
        2,
        30,
        0.5,
    )
    assert [member.name for member in run.members] == ["gpt"]
    assert [event["type"] for event in events] == ["run_started", "run_finished"]
    assert events[1] == {
        "run_id": "v2",
        "seq": 2,
        "ts": 1700000009.5,
        "type": "run_finished",
        "final_answer": "PostgreSQL.",
        "reached_answer": True,
        "result": {"winner": "gpt"},
    }
    assert (truncated.messages, truncated.response, truncated.truncated, truncated.ts) == (
        [{"role": "user", "content": "Which database?"}],
        "PostgreSQL, because",
        True,
        1700000001.75,
    )
    assert (failed.response, failed.error_kind, failed.detail, failed.attempts) == (None, "timeout", '{"raw": true}', 3)
    with sqlite3.connect(path) as db:
        version = db.execute("PRAGMA user_version").fetchone()[0]
    assert version == (2 if bring_forward == "reader" else len(MIGRATIONS))


# -- a file written by schema version 3, the one before texts were stored once ------------

FIXTURES = Path(__file__).parent / "fixtures"


def fixture_copy(tmp_path: Path) -> Path:
    path = tmp_path / "store" / "schema3.db"
    path.parent.mkdir()
    shutil.copy(FIXTURES / "schema3.db", path)
    return path


def expected_reads() -> dict[str, Any]:
    """What the reader of schema 3 returned for every run of the fixture (see its README)."""
    with gzip.open(FIXTURES / "schema3-read.json.gz", "rt", encoding="utf-8") as file:
        return json.load(file)


def assert_reads_as_before(reader: TranscriptReader) -> None:
    expected = expected_reads()
    assert sorted(run.id for run in reader.list_runs(limit=-1)) == sorted(expected["runs"])
    for run_id, before in expected["runs"].items():
        run = asdict(reader.get_run(run_id))
        # Read as every run's cost is now (docs/result.md#cost): demo personas' calls cost 0.0, simulated.
        read_before = before["run"] | ({"cost": 0.0} if run["cost_basis"] == "simulated" else {})
        assert {key: run[key] for key in before["run"]} == read_before, run_id
        assert reader.run_events(run_id) == before["events"], run_id
        calls = [asdict(call) for call in reader.run_calls(run_id)]
        assert [{key: call[key] for key in old} for call, old in zip(calls, before["calls"], strict=True)] == before[
            "calls"
        ]
        assert [asdict(retally) for retally in reader.run_retallies(run_id)] == before["retallies"]
    assert [asdict(decision) for decision in reader.list_decisions(limit=100)] == expected["decisions"]


def test_the_schema_3_fixture_is_a_schema_3_file() -> None:
    with sqlite3.connect(f"{(FIXTURES / 'schema3.db').resolve().as_uri()}?mode=ro", uri=True) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 3
        protocols = {row[0] for row in db.execute("SELECT protocol FROM runs")}
        statuses = {row[0] for row in db.execute("SELECT status FROM runs")}
        assert db.execute("SELECT count(*) FROM retallies").fetchone()[0] == 2
        assert db.execute("SELECT count(*) FROM decisions").fetchone()[0] == 1
    db.close()
    assert {"confer", "council", "vote", "decide", "orchestrate", "delphi", "supervise", "ensemble"} <= protocols
    assert {"finished", "interrupted", "running"} <= statuses


def test_the_reader_reads_a_schema_3_file_as_before_without_changing_it(tmp_path: Path) -> None:
    path = fixture_copy(tmp_path)
    before = path.read_bytes()
    with TranscriptReader.open(path) as reader:
        assert reader.version == 3
        assert_reads_as_before(reader)
    assert path.read_bytes() == before
    assert sorted(file.name for file in path.parent.iterdir()) == ["schema3.db"]


async def test_the_writer_migrates_a_schema_3_file_and_every_run_reads_back_identically(tmp_path: Path) -> None:
    path = fixture_copy(tmp_path)
    size = path.stat().st_size
    store = await TranscriptStore.open(path)
    await store.close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        names = {row[0] for row in db.execute("SELECT name FROM sqlite_master")}
        finished = db.execute("SELECT count(*), count(payload_json) FROM events WHERE type = 'run_finished'").fetchone()
    db.close()
    assert not {name for name in names if name.endswith("_v3")}
    assert {"texts", "text_search", "call_texts", "run_texts"} <= names
    assert finished[0] == 9 and finished[1] == 0  # the result is the run row's, not repeated
    # Given back by the VACUUM after the move: vacuumed again, the file hardly shrinks.
    again = tmp_path / "vacuumed.db"
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("VACUUM INTO ?", (str(again),))
    assert path.stat().st_size <= again.stat().st_size + 2 * PAGE_SIZE < size
    with TranscriptReader.open(path) as reader:
        assert reader.version == len(MIGRATIONS)
        assert_reads_as_before(reader)


async def test_a_migrated_file_is_searchable_and_takes_new_runs(tmp_path: Path) -> None:
    path = fixture_copy(tmp_path)
    store = await TranscriptStore.open(path)
    await EventBus("fresh", [store]).emit(run_started(question="Which queue for the audit events?"))
    await store.close()
    with TranscriptReader.open(path) as reader:
        monorepo = reader.list_runs(search="monorepo")
        audit = reader.list_runs(search="audit")
        crashed = reader.get_run("dcb352c2")
        confer = reader.list_runs(protocol="confer", status="finished")
        assert reader.count_runs() == 12
    assert [run.protocol for run in monorepo] == ["council", "council"]
    assert [run.id for run in audit] == ["fresh", "3a5045f3257f"]
    assert (crashed.status, crashed.pid, crashed.host) == ("running", None, None)  # no process to ask about
    assert [run.outcome for run in confer] == ["skeptic"]


def test_migration_8_adds_the_eval_tables_and_leaves_runs_alone(tmp_path):
    """A version-7 file with a run gains the four eval tables, empty; its run is as it was."""
    path = tmp_path / "seven.db"
    db = sqlite3.connect(path, isolation_level=None)
    for migration in MIGRATIONS[:7]:
        migration(db)
    db.execute("PRAGMA user_version = 7")
    db.execute("INSERT INTO runs (id, protocol, status) VALUES ('r1', 'confer', 'finished')")
    db.close()
    connect(path).close()
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == len(MIGRATIONS)
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert {"evals", "eval_questions", "eval_items", "eval_judge_calls"} <= tables
        assert db.execute("SELECT count(*) FROM evals").fetchone()[0] == 0
        assert db.execute("SELECT id, protocol, status FROM runs").fetchall() == [("r1", "confer", "finished")]
    db.close()
