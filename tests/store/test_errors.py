"""A file panel cannot use is one sentence (a UserError: exit code 2), for the new tables and
the writers that maintain them too: a newer schema, damage, a read-only folder."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import pytest

from panel_cli.errors import UserError
from panel_cli.store.connection import connect
from panel_cli.store.maintenance import delete_run, purge_runs
from panel_cli.store.migrations import MIGRATIONS
from panel_cli.store.reader import TranscriptReader
from panel_cli.store.subscriber import TranscriptStore
from tests.faults.test_store_faults import write_protected
from tests.store.sample_runs import confer_run, record


def refusals(path: Path) -> list[str]:
    """What the reader and each writer say of `path`."""
    messages = []
    for attempt in (
        lambda: TranscriptReader.open(path).list_runs(),
        lambda: connect(path),
        lambda: delete_run(path, "r1"),
        lambda: purge_runs(path, older_than=time.time()),
    ):
        with pytest.raises(UserError) as caught:
            attempt()
        assert caught.value.exit_code == 2
        messages.append(caught.value.message)
    return messages


async def stored(folder: Path) -> Path:
    folder.mkdir()
    path = folder / "panel.db"
    await record(path, "r1", confer_run("r1"))
    return path


async def test_a_newer_schema_is_refused_by_every_reader_and_writer(tmp_path: Path) -> None:
    path = await stored(tmp_path / "store")
    with sqlite3.connect(path) as db:
        db.execute(f"PRAGMA user_version = {len(MIGRATIONS) + 1}")
    db.close()
    expected = (
        f"{path} was written by a newer version of panel (schema version {len(MIGRATIONS) + 1}, "
        f"this one knows up to {len(MIGRATIONS)}); upgrade panel to use it."
    )
    assert refusals(path) == [expected] * 4


async def test_a_damaged_file_is_one_sentence_everywhere(tmp_path: Path) -> None:
    path = await stored(tmp_path / "store")
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    for message in refusals(path):
        assert message.startswith(f"The transcript database {path} is damaged (")
        assert message.endswith("); move it aside, or pick another file with --db or PANEL_DB.")


async def test_a_missing_text_reads_as_damage(tmp_path: Path) -> None:
    path = await stored(tmp_path / "store")
    with TranscriptReader.open(path) as reader:
        before = [call.response for call in reader.run_calls("r1")]
    with sqlite3.connect(path) as db:
        db.execute("DELETE FROM texts WHERE id = (SELECT response_text FROM calls LIMIT 1)")
    db.close()
    with TranscriptReader.open(path) as reader:
        assert reader.get_run("r1").id == "r1"
        after = [call.response for call in reader.run_calls("r1")]
    assert after.count(None) == before.count(None) + 1, "the call whose reply is gone reads as having none"


@pytest.mark.subprocess
async def test_maintenance_in_a_read_only_folder_is_one_sentence(tmp_path: Path) -> None:
    path = await stored(tmp_path / "store")
    with write_protected(path.parent):
        for attempt in (lambda: delete_run(path, "r1"), lambda: purge_runs(path, older_than=time.time())):
            with pytest.raises(UserError) as caught:
                attempt()
            assert caught.value.message.startswith(f"Cannot write to the transcript database {path} (")
        with TranscriptReader.open(path) as reader:
            assert [run.id for run in reader.list_runs()] == ["r1"]


@pytest.mark.subprocess
async def test_a_write_protected_file_is_refused_before_anything_is_deleted(tmp_path: Path) -> None:
    path = await stored(tmp_path / "store")
    with write_protected(path):
        with pytest.raises(UserError, match=r"is write-protected \("):
            delete_run(path, "r1")
        with pytest.raises(UserError, match=r"is write-protected \("):
            await TranscriptStore.open(path)
    with TranscriptReader.open(path) as reader:
        assert reader.count_runs() == 1
