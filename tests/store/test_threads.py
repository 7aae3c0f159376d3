"""Threads of follow-ups in the store: migration 7's `parent_id` column, filled from a run's
config, and the reader walking a thread both ways."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

from panel_cli.events import RunFinished, RunStarted
from panel_cli.store.connection import connect
from panel_cli.store.maintenance import delete_run
from panel_cli.store.migrations import MIGRATIONS
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.subscriber import TranscriptStore
from tests.store.sample_runs import record, run_started

FIXTURES = Path(__file__).parent / "fixtures"


def follow_up(question: str, parent: str | None) -> RunStarted:
    started = run_started(question)
    return started if parent is None else started.model_copy(update={"config": {**started.config, "parent_id": parent}})


async def keep_thread(path: Path, runs: list[tuple[str, str, str | None]]) -> None:
    """Store each (id, question, parent id) as a finished run, in order."""
    for run_id, question, parent in runs:
        await record(
            path, run_id, [follow_up(question, parent), RunFinished(final_answer=f"Answer to {question}", result={})]
        )


async def test_migration_7_adds_an_indexed_parent_id(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    connect(path).close()
    with sqlite3.connect(path) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(runs)")}
        (plan,) = db.execute("EXPLAIN QUERY PLAN SELECT id FROM runs WHERE parent_id = 'x'").fetchall()
    db.close()
    assert len(MIGRATIONS) >= 7 and "parent_id" in columns
    assert plan[3] == "SEARCH runs USING INDEX runs_parent_id (parent_id=?)"


async def test_a_schema_3_file_migrates_with_no_parents(tmp_path: Path) -> None:
    path = tmp_path / "schema3.db"
    shutil.copy(FIXTURES / "schema3.db", path)
    await (await TranscriptStore.open(path)).close()
    with TranscriptReader.open(path) as reader:
        runs = reader.list_runs(-1)
        first = reader.get_run(runs[0].id)
    assert len(runs) == 11 and {run.parent_id for run in runs} == {None}
    assert first.thread.ancestors == [] and first.thread.follow_ups == []


async def test_the_writer_keeps_the_parent_and_the_reader_walks_the_thread(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    await keep_thread(
        path,
        [
            ("a", "First?", None),
            ("b", "Second?", "a"),
            ("c", "Third?", "b"),
            ("d", "Branch?", "a"),
            ("e", "Fourth?", "c"),
            ("x", "Alone?", None),
        ],
    )
    with TranscriptReader.open(path) as reader:
        b = reader.get_run("b")
        c = reader.get_run("c")
        listed = {run.id: run.parent_id for run in reader.list_runs(-1)}
    assert listed == {"a": None, "b": "a", "c": "b", "d": "a", "e": "c", "x": None}
    assert b.parent_id == "a" and b.config["parent_id"] == "a"
    assert [(run.run_id, run.depth) for run in b.thread.ancestors] == [("a", 1)]
    assert [(run.run_id, run.parent_id, run.depth) for run in b.thread.follow_ups] == [("c", "b", 1), ("e", "c", 2)]
    assert [(run.run_id, run.depth) for run in c.thread.ancestors] == [("a", 2), ("b", 1)]
    assert c.thread.ancestors[0].question == "First?" and c.thread.ancestors[0].answer_preview == "Answer to First?"
    with TranscriptReader.open(path) as reader:
        a = reader.get_run("a")
    assert [(run.run_id, run.depth) for run in a.thread.follow_ups] == [("b", 1), ("c", 2), ("e", 3), ("d", 1)]


async def test_a_deleted_run_cuts_the_thread_above_it(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    await keep_thread(path, [("a", "First?", None), ("b", "Second?", "a"), ("c", "Third?", "b")])
    delete_run(path, "b")
    with TranscriptReader.open(path) as reader:
        c = reader.get_run("c")
        a = reader.get_run("a")
    assert c.parent_id == "b" and c.thread.ancestors == []
    assert a.thread.follow_ups == []
