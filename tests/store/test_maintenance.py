"""Deleting and purging runs: every row of the run goes, and every text no other run needs,
while the other runs read back exactly as before."""

from __future__ import annotations

import os
import socket
import sqlite3
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest

from panel_cli.errors import UserError
from panel_cli.events import EventBus
from panel_cli.store.maintenance import delete_run, purge_runs, record_retally
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.records import RetallyRecord
from panel_cli.store.subscriber import TranscriptStore
from tests.store.protocol_runs import stored_run
from tests.store.sample_runs import run_started

DAY = 86400.0


def counts(path: Path) -> dict[str, int]:
    with sqlite3.connect(path) as db:
        found = {
            table: db.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
            for table in ("runs", "events", "calls", "decisions", "retallies", "texts")
        }
        found["indexed"] = db.execute("SELECT count(*) FROM text_search_docsize").fetchone()[0]
        found["searchable"] = db.execute("SELECT count(*) FROM texts WHERE searchable = 1").fetchone()[0]
    db.close()
    return found


def snapshot(path: Path, run_id: str) -> dict[str, Any]:
    with TranscriptReader.open(path) as reader:
        return {
            "run": asdict(reader.get_run(run_id)),
            "events": reader.run_events(run_id),
            "calls": [asdict(call) for call in reader.run_calls(run_id)],
        }


async def three_runs(path: Path) -> None:
    """Two decide runs (they share texts: the options, the ballot's schema, the members'
    answers about the same choice) and a confer run; one decide run has a recount."""
    await stored_run(path, "keep", "decide")
    await stored_run(path, "drop", "decide", question="Should we release version 2.1 on Monday?")
    await stored_run(path, "other", "confer")
    record_retally(
        path, RetallyRecord(id="t1", run_id="drop", method="majority", quorum=1, result={"winner": "x"}, created_at=1.0)
    )


async def test_delete_run_removes_its_rows_and_texts_no_other_run_needs(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    await three_runs(path)
    before = counts(path)
    kept = {run_id: snapshot(path, run_id) for run_id in ("keep", "other")}
    delete_run(path, "drop")
    after = counts(path)
    assert (after["runs"], after["decisions"], after["retallies"]) == (2, 1, 0)
    assert 0 < after["texts"] < before["texts"]
    assert after["indexed"] == after["searchable"] < before["searchable"]
    with sqlite3.connect(path) as db:
        assert db.execute("SELECT count(*) FROM events WHERE run_id = 'drop'").fetchone()[0] == 0
        assert db.execute("SELECT count(*) FROM calls WHERE run_id = 'drop'").fetchone()[0] == 0
    db.close()
    for run_id, snap in kept.items():
        assert snapshot(path, run_id) == snap
    with TranscriptReader.open(path) as reader:
        assert [run.id for run in reader.list_runs(search="release")] == ["keep"]
        assert reader.list_runs(search="monday") == []


async def test_deleting_every_run_leaves_no_text(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    await three_runs(path)
    for run_id in ("keep", "drop", "other"):
        delete_run(path, run_id)
    assert counts(path) == dict.fromkeys(
        ("runs", "events", "calls", "decisions", "retallies", "texts", "indexed", "searchable"), 0
    )
    with TranscriptReader.open(path) as reader:
        assert reader.list_runs(search="release") == []


async def test_delete_run_refuses_an_unknown_id_and_a_run_still_writing(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    async with await TranscriptStore.open(path) as store:
        await EventBus("live", [store]).emit(run_started())
        with pytest.raises(UserError) as caught:
            delete_run(path, "live")
    assert caught.value.message == f"Run live is still running (process {os.getpid()}); stop it, or wait for it to end."
    with pytest.raises(UserError, match=r"^No run has the id 'nope'; `panel history list` shows the stored runs\.$"):
        delete_run(path, "nope")
    assert counts(path)["runs"] == 1


async def write_started(
    path: Path, run_id: str, started: float, *, status: str = "finished", pid: int | None = None
) -> None:
    """A run as `stored_run` makes it, moved back in time, ended as `status`."""
    await stored_run(path, run_id, "confer")
    moved = time.strftime("%Y-%m-%dT%H:%M:%S.000000000Z", time.gmtime(started))
    with sqlite3.connect(path) as db:
        db.execute(
            "UPDATE runs SET started_at = ?, status = ?, pid = ?, host = ? WHERE id = ?",
            (moved, status, pid, socket.gethostname(), run_id),
        )
    db.close()


async def test_purge_runs_older_than_a_time_with_a_status(tmp_path: Path) -> None:
    path = tmp_path / "panel.db"
    now = time.time()
    await write_started(path, "old-interrupted", now - 40 * DAY, status="interrupted")
    await write_started(path, "old-finished", now - 35 * DAY)
    await write_started(path, "old-stale", now - 31 * DAY, status="running", pid=2**22 + 7)
    await write_started(path, "old-live", now - 32 * DAY, status="running", pid=os.getpid())
    await write_started(path, "recent", now - DAY, status="interrupted")
    recent = snapshot(path, "recent")

    assert purge_runs(path, older_than=now - 30 * DAY, status="interrupted") == ["old-interrupted"]
    assert purge_runs(path, older_than=now - 30 * DAY) == ["old-finished", "old-stale"]
    assert purge_runs(path, older_than=now - 30 * DAY) == []
    with TranscriptReader.open(path) as reader:
        assert sorted(run.id for run in reader.list_runs()) == ["old-live", "recent"]
    assert snapshot(path, "recent") == recent
    delete_run(path, "recent")
    with sqlite3.connect(path) as db:
        texts = db.execute("SELECT count(*) FROM texts").fetchone()[0]
    db.close()
    assert texts > 0  # the live run's
    assert snapshot(path, "old-live")["run"]["status"] == "running"


async def test_a_text_kept_only_as_part_of_a_prompt_survives_a_purge(tmp_path: Path) -> None:
    """A vote prompt is kept as parts: slices of the round's first prompt, the answers it
    quotes, and long lines every confer run sends (shared with the deleted run)."""
    path = tmp_path / "panel.db"
    await stored_run(path, "first", "confer")
    await stored_run(path, "second", "confer")
    second = snapshot(path, "second")
    delete_run(path, "first")
    assert snapshot(path, "second") == second
